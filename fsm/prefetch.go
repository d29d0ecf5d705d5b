package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// prefetchMin is the fewest heads a claim must have, none of them in the
// recent cache, before it reads them with one iterator rather than a Get
// each.
//
// Why: a claim from an old backlog reads records and bodies that are in
// the tables, not in the cache. A Get builds a merged lookup over the
// batch, the memtables and every level, and checks a bloom filter per
// file: about 10 µs a key at a 1M backlog, the largest share of the
// drain's apply CPU (BENCHMARKS.md). The claim knows which tasks it will
// take before it reads any (the ready order's heads), and their keys are
// neighbours: ids grow with the log, so a FIFO backlog's heads are
// consecutive t/ keys and consecutive v/ keys. One iterator, seeking
// forward through the sorted keys, reads each after the first as a step
// within the block it is already in. Below a few keys the iterator's
// set-up costs more than the Gets it replaces.
const prefetchMin = 8

// fetched is what a claim's prefetch read for one head: the t/ value and
// the v/ value, nil where the key is absent. Both are copies.
type fetched struct{ rec, body []byte }

// prefetch reads the records and bodies of a claim's heads through one
// iterator over the apply batch, for the claim to decode (fetchedTask),
// or returns nil when the claim is to read them one by one (getTask):
// fewer than prefetchMin heads, the recent cache off, or heads the cache
// holds.
//
// Whether the cache holds them is asked of the first and last head only:
// heads enqueued moments before are all cached, and an old backlog's none.
// Asking about each of 200 keys was 4 % of a follower's CPU in a drain,
// and putting what it read into the cache, for getTask to look up again,
// 7 % more; neither is done. When the ends disagree the cache is asked
// about each head's record, and the claim reads the cached ones by
// getTask.
//
// The values are the batch's own at this moment, so a claim that decodes
// them reads what getTask would: nothing writes a head's record or body
// between the prefetch and its claim (Test_ClaimPrefetchKeepsAnswers holds
// the answers and writes to a replica's without the cache).
func (tx *txn) prefetch(heads []pendingHead) ([]fetched, error) {
	rr, ok := tx.r.(recentReader)
	if !ok || rr.c == nil || len(heads) < prefetchMin {
		return nil, nil
	}
	first, last := rr.c.has(storage.TaskKey(heads[0].id)), rr.c.has(storage.TaskKey(heads[len(heads)-1].id))
	if first && last {
		return nil, nil
	}
	askEach := first != last
	// A checkpoint window's records are not in the batch the iterator
	// reads: each head is looked up in the window's map (a Go map look-up,
	// not the cache's two generations), and getTask reads the ones it
	// holds (checkpoint.go).
	var dirty *dirtyRecords
	if dr, ok := rr.inner.(dirtyReader); ok && len(dr.d.m) > 0 {
		dirty = dr.d
	}
	type want struct {
		k    []byte
		head int
		body bool
	}
	size := 0
	for _, h := range heads {
		size += len(storage.TaskPrefix()) + len(storage.BodyPrefix()) + 2*len(h.id)
	}
	buf := make([]byte, 0, size) // never grows: the keys below alias it
	keys := make([]want, 0, 2*len(heads))
	for i, h := range heads {
		start := len(buf)
		buf = append(append(buf, storage.TaskPrefix()...), h.id...)
		rec := buf[start:len(buf):len(buf)]
		if askEach && rr.c.has(rec) || dirty != nil && dirty.has(rec) {
			continue // getTask reads it from the cache or the window
		}
		start = len(buf)
		buf = append(append(buf, storage.BodyPrefix()...), h.id...)
		keys = append(keys, want{k: rec, head: i}, want{k: buf[start:len(buf):len(buf)], head: i, body: true})
	}
	if len(keys) < 2*prefetchMin {
		return nil, nil
	}
	slices.SortFunc(keys, func(a, b want) int { return bytes.Compare(a.k, b.k) })
	it, err := rr.inner.NewIter(&pebble.IterOptions{
		LowerBound: keys[0].k,
		UpperBound: append(slices.Clip(keys[len(keys)-1].k), 0),
	})
	if err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	out := make([]fetched, len(heads))
	var vals []byte // one allocation for most claims; slices of it are handed out
	// Every t/ key sorts before every v/ key, so a head's record is read
	// before its body is looked for, and the body of a record that has
	// none (whole, or split with an empty payload) is not sought: from
	// LevelInlineBodies most records are whole, and each such seek would
	// land on the next body there is, past the last few steps.
	for i, w := range keys {
		if w.body && out[w.head].rec != nil && !splitWithBody(out[w.head].rec) {
			continue
		}
		if !seekNear(it, w.k, i == 0) || !bytes.Equal(it.Key(), w.k) {
			continue // absent: fetchedTask reads a missing record again and refuses a split one without its body
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("prefetch %s: %w", w.k, errors.Join(err, it.Close()))
		}
		if cap(vals)-len(vals) < len(v) {
			vals = make([]byte, 0, max(len(v), 32<<10))
		}
		start := len(vals)
		vals = append(vals, v...)
		v = vals[start:len(vals):len(vals)]
		if w.body {
			out[w.head].body = v
		} else {
			out[w.head].rec = v
		}
		rr.c.stats.prefetched++
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	return out, nil
}

// splitWithBody reports whether a t/ value is a split record with a body
// in v/ (storage.FormatSplit); a value it cannot read is left to the
// claim's decode to refuse.
func splitWithBody(rec []byte) bool {
	_, format, err := storage.TaskRecordMessage(rec)
	return err != nil || format == storage.FormatSplit
}

// fetchedTask is getTask for a claim's head i: decoded from what the
// prefetch read, or read by getTask when it read nothing for it.
func (tx *txn) fetchedTask(pre []fetched, i int, id string) (*pb.Task, bool, error) {
	if i >= len(pre) || pre[i].rec == nil {
		return tx.getTask(id)
	}
	t, format, err := storage.DecodeTaskRecord(pre[i].rec)
	if err != nil {
		return nil, false, fmt.Errorf("task %s: %w", id, err)
	}
	if format == storage.FormatSplit {
		if pre[i].body == nil {
			return nil, false, fmt.Errorf("task %s: split record without its body: %w", id, storage.ErrNotFound)
		}
		t.Payload = pre[i].body
	}
	tx.formats[id] = format
	return t, true, nil
}

// prefetchSteps is how many keys seekNear steps over before it seeks.
const prefetchSteps = 4

// seekNear moves it to the first key at or after k, which is after the
// key it is at unless first. A claim's heads are mostly neighbours (a
// FIFO backlog's consecutive t/ and v/ keys), and a step is a fraction
// of a seek, which positions every level of the LSM again; so it steps a
// few keys before it seeks. It reports whether it stands on a key.
func seekNear(it *pebble.Iterator, k []byte, first bool) bool {
	if !first && it.Valid() {
		for range prefetchSteps {
			if bytes.Compare(it.Key(), k) >= 0 {
				return true
			}
			if !it.Next() {
				return false
			}
		}
	}
	return it.SeekGE(k)
}
