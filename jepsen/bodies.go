package jepsen

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dockethq/docket/client"
)

// Task bodies large enough for Pebble's blob files (values of 1 KiB and
// more, storage/valsep.go), in a queue of their own. The workload's own
// payloads are task keys, far smaller, so no node had a blob file and
// corrupt-disk never damaged one. Nothing claims these tasks and no
// checker reads them; the consistency check hashes them, a snapshot for a
// follower streams them and the scrub reads their files, which is where a
// damaged blob must be found.
const (
	BodiesQueue = "jepsen-bodies"
	bodySize    = 2 << 10
	bodiesEvery = 500 * time.Millisecond
)

// bodies enqueues one body every bodiesEvery until ctx ends. It records
// nothing: a refused or lost enqueue here tests nothing the main queue
// does not.
func (w *workload) bodies(ctx context.Context) {
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		key := fmt.Sprintf("body-%d", n)
		// Text that differs per task, so that the blob files hold bytes
		// a flip can damage, not a run that compresses to nothing.
		body := []byte(strings.Repeat(key+" ", bodySize/len(key)+1)[:bodySize])
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = w.cl.EnqueueOne(c, BodiesQueue, body, client.TaskIdempotencyKey(key), client.TaskTenant(Tenant))
		cancel()
		sleepCtx(ctx, bodiesEvery)
	}
}
