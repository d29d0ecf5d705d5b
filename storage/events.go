package storage

import (
	"github.com/cockroachdb/pebble/v2"
)

// DiskEventKind says what Pebble reported.
type DiskEventKind int

const (
	// DiskBackgroundError: a flush, compaction or other background job
	// failed (Err). Pebble retries flushes at once, so a full disk repeats
	// this many times a second.
	DiskBackgroundError DiskEventKind = iota + 1
	// DiskWriteStallBegin: writes wait for a flush or compaction (Detail
	// says which). Commit blocks until DiskWriteStallEnd.
	DiskWriteStallBegin
	// DiskWriteStallEnd: the stall is over.
	DiskWriteStallEnd
	// DiskJobDone: a flush or compaction succeeded, so the disk takes
	// writes again.
	DiskJobDone
	// DiskSlow: one write to a file took longer than Pebble's disk
	// slowness threshold (Detail).
	DiskSlow
)

// DiskEvent is one report from Pebble about the disk under the keyspace.
// It carries no time: the receiver (the node's health) stamps it.
type DiskEvent struct {
	Kind   DiskEventKind
	Err    error  // DiskBackgroundError only
	Detail string // human-readable context
}

// diskEventListener forwards the events health cares about to fn. With fn
// nil it returns nil, and Pebble keeps its defaults (it logs each
// background error).
func diskEventListener(fn func(DiskEvent)) *pebble.EventListener {
	if fn == nil {
		return nil
	}
	return &pebble.EventListener{
		BackgroundError: func(err error) { fn(DiskEvent{Kind: DiskBackgroundError, Err: err, Detail: err.Error()}) },
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			fn(DiskEvent{Kind: DiskWriteStallBegin, Detail: info.Reason})
		},
		WriteStallEnd: func() { fn(DiskEvent{Kind: DiskWriteStallEnd}) },
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				fn(DiskEvent{Kind: DiskJobDone, Detail: "flush"})
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				fn(DiskEvent{Kind: DiskJobDone, Detail: "compaction"})
			}
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			fn(DiskEvent{Kind: DiskSlow, Detail: info.String()})
		},
	}
}
