package fsm

import "github.com/dockethq/docket/storage"

// DiskEvent is storage's report about the disk under the keyspace. fsm
// names it so that Options.OnDiskEvent and its callers keep their shape;
// the listener that makes these is storage's.
type DiskEvent = storage.DiskEvent

// DiskEventKind says what Pebble reported (storage.DiskEventKind).
type DiskEventKind = storage.DiskEventKind

// The kinds of DiskEvent, as storage defines them.
const (
	DiskBackgroundError = storage.DiskBackgroundError
	DiskWriteStallBegin = storage.DiskWriteStallBegin
	DiskWriteStallEnd   = storage.DiskWriteStallEnd
	DiskJobDone         = storage.DiskJobDone
	DiskSlow            = storage.DiskSlow
)
