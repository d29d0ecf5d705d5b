package bench

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
)

// Fair queues (feature level 16) through the API: --task-keys gives every
// enqueued task a key, so a keyed run and a plain one can be measured in
// the same sitting. Without it, the bench sends exactly what it always
// did.

// levelWait bounds the wait for the cluster to latch LevelFairQueues: a
// fresh local cluster latches within a second or two of electing its
// leader; a cluster with a node of an older build never does.
const levelWait = 30 * time.Second

// fair reports whether the run needs feature level 16: its tasks carry
// keys.
func (c *Config) fair() bool {
	return c.TaskKeys > 0
}

// taskKey is the key of the seq-th task the run enqueues: round robin
// over TaskKeys keys, so each key holds the same share (give or take one)
// and all of them are active while a backlog lasts.
func (c *Config) taskKey(seq uint64) []byte {
	return fmt.Appendf(nil, "k%06d", seq%uint64(c.TaskKeys))
}

// fairDescribe is what the report's config says of --task-keys, when it
// was given (as 0 too), so a keyed run and its plain baseline state the
// same field.
func (c *Config) fairDescribe(m map[string]any) {
	if !c.fairGiven {
		return
	}
	m["task_keys"] = c.TaskKeys
}

// fairText is the text report's line for the same, "" without them.
func (c *Config) fairText() string {
	if !c.fairGiven {
		return ""
	}
	keys := "none"
	if c.TaskKeys > 0 {
		keys = fmt.Sprintf("%d (k%06d..k%06d, round robin)", c.TaskKeys, 0, c.TaskKeys-1)
	}
	return fmt.Sprintf("fair queues: task keys %s", keys)
}

// fairSetup runs before the workload when tasks carry keys: it waits
// until the cluster latched feature level 16, below which a keyed Enqueue
// is refused.
func (r *runner) fairSetup(ctx context.Context, c *client.Client) error {
	if !r.cfg.fair() {
		return nil
	}
	return r.waitLevel(ctx, c, fsm.LevelFairQueues, levelWait)
}

// waitLevel polls Status until the cluster's enabled feature level is at
// least level, for at most d.
func (r *runner) waitLevel(ctx context.Context, c *client.Client, level uint32, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	said := false
	last := "no status answered"
	for {
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Status(sctx)
		scancel()
		if err == nil && st.GetEnabledFeatureLevel() >= level {
			return nil
		}
		if err == nil {
			last = fmt.Sprintf("it latched %d", st.GetEnabledFeatureLevel())
		} else {
			last = fmt.Sprintf("last status: %v", err)
		}
		if !said {
			fmt.Fprintf(r.stderr, "bench: waiting up to %v for the cluster to latch feature level %d (fair queues)\n", d, level)
			said = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fair queues need feature level %d, not latched within %v (%s); every node must run a build that applies it",
				level, d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// parseFair checks --task-keys and notes whether it was given
// (fairGiven).
func (c *Config) parseFair(fs *flag.FlagSet) []error {
	var errs []error
	if c.TaskKeys < 0 {
		errs = append(errs, fmt.Errorf("--task-keys %d must be >= 0", c.TaskKeys))
	}
	fs.Visit(func(f *flag.Flag) { c.fairGiven = c.fairGiven || f.Name == "task-keys" })
	return errs
}
