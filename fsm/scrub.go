package fsm

import (
	"context"
	"errors"
	"fmt"

	"github.com/dockethq/docket/storage"
)

// ErrClosed means the FSM's keyspace is closed (the node is stopping).
var ErrClosed = errors.New("fsm closed")

// Scrub re-reads the keyspace's table and blob files from disk and
// verifies their checksums (storage.Home.Scrub). It holds the keyspace's
// lock only to list the files: a restore that swaps the keyspace while the files are
// read only makes it skip the ones that went away. between paces it; the caller owns the clock.
func (f *FSM) Scrub(ctx context.Context, between func(read int64) error) (storage.ScrubStats, error) {
	f.mu.RLock()
	if f.db == nil {
		f.mu.RUnlock()
		return storage.ScrubStats{}, ErrClosed
	}
	live, err := storage.ListLive(f.db)
	f.mu.RUnlock()
	if err != nil {
		return storage.ScrubStats{}, fmt.Errorf("scrub: %w", err)
	}
	return f.home.Scrub(ctx, live, between)
}
