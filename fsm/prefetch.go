package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dockethq/docket/storage"
)

// prefetchMin is the fewest records a claim must miss in the recent cache
// before it reads them with one iterator rather than a Get each.
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
// within the block it is already in (Pebble's TrySeekUsingNext). Below a
// few keys the iterator's set-up costs more than the Gets it replaces.
const prefetchMin = 8

// prefetch reads the records and bodies of a claim's heads that the
// recent cache does not hold, through one iterator over the apply batch,
// and puts what it finds into the cache, from which getTask then reads
// them. It changes nothing a read answers: the values are the batch's own
// at this moment, and every later write of those keys goes through the
// cache as well (recentWriter). A body too large for the cache is not
// kept, and its Get reads it as before.
//
// It runs on every claim of prefetchMin or more tasks, so the keys are
// built in one buffer rather than allocated one by one.
func (tx *txn) prefetch(heads []pendingHead) error {
	rr, ok := tx.r.(recentReader)
	if !ok || rr.c == nil || len(heads) < prefetchMin {
		return nil
	}
	size := 0
	for _, h := range heads {
		size += len(storage.TaskPrefix()) + len(storage.BodyPrefix()) + 2*len(h.id)
	}
	buf := make([]byte, 0, size) // never grows: the keys below alias it
	keys := make([][]byte, 0, 2*len(heads))
	// The ends say which case this is: heads enqueued moments before are
	// all cached, and those of an old backlog none. Only a claim whose
	// ends disagree asks the cache about each key; a lookup in a large
	// cache is a few cache-missing probes, 4 % of a follower's CPU in a
	// drain when every key was asked.
	first, last := rr.c.has(storage.TaskKey(heads[0].id)), rr.c.has(storage.TaskKey(heads[len(heads)-1].id))
	if first && last {
		return nil
	}
	askEach := first != last
	for _, h := range heads {
		for _, prefix := range [2][]byte{storage.TaskPrefix(), storage.BodyPrefix()} {
			start := len(buf)
			buf = append(append(buf, prefix...), h.id...)
			k := buf[start:len(buf):len(buf)]
			if !askEach || !rr.c.has(k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) < prefetchMin {
		return nil
	}
	slices.SortFunc(keys, bytes.Compare)
	it, err := rr.inner.NewIter(&pebble.IterOptions{
		LowerBound: keys[0],
		UpperBound: append(slices.Clip(keys[len(keys)-1]), 0),
	})
	if err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	for i, k := range keys {
		if !seekNear(it, k, i == 0) || !bytes.Equal(it.Key(), k) {
			continue // absent: an inline record has no body; getTask says the rest
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("prefetch %s: %w", k, errors.Join(err, it.Close()))
		}
		rr.c.put(k, v) // copies v into the cache's arena
		rr.c.stats.prefetched++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	return nil
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
