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

// prefetch reads the records and bodies of ids that the recent cache does
// not hold, through one iterator over the apply batch, and puts what it
// finds into the cache, from which getTask then reads them. It changes
// nothing a read answers: the values are the batch's own at this moment,
// and every later write of those keys goes through the cache as well
// (recentWriter). A body too large for the cache is not kept, and its
// Get reads it as before.
func (tx *txn) prefetch(ids []string) error {
	rr, ok := tx.r.(recentReader)
	if !ok || rr.c == nil || len(ids) < prefetchMin {
		return nil
	}
	keys := make([][]byte, 0, 2*len(ids))
	for _, id := range ids {
		for _, k := range [2][]byte{storage.TaskKey(id), storage.BodyKey(id)} {
			if _, ok := rr.c.get(k); !ok {
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
	for _, k := range keys {
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
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

// prefetchHeads prefetches the tasks of a claim's heads.
func (tx *txn) prefetchHeads(heads []pendingHead) error {
	if len(heads) < prefetchMin {
		return nil
	}
	ids := make([]string, len(heads))
	for i, h := range heads {
		ids[i] = h.id
	}
	return tx.prefetch(ids)
}
