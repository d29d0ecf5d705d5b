package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
)

// Fair queues (feature level 16) through the API: --task-keys gives every
// enqueued task a key, --order and --max-running-per-key set the queue's
// configuration before the workload, so a keyed or fair run and a plain
// one can be measured in the same sitting. With none of the three given,
// the bench sends exactly what it always did.

// levelWait bounds the wait for the cluster to latch LevelFairQueues: a
// fresh local cluster latches within a second or two of electing its
// leader; a cluster with a node of an older build never does.
const levelWait = 30 * time.Second

// fair reports whether the run needs feature level 16: its tasks carry
// keys, or it configures the queue's per-key rules.
func (c *Config) fair() bool {
	return c.TaskKeys > 0 || c.Order != "" || c.MaxRunningPerKey != nil
}

// taskKey is the key of the seq-th task the run enqueues: round robin
// over TaskKeys keys, so each key holds the same share (give or take one)
// and all of them are active while a backlog lasts.
func (c *Config) taskKey(seq uint64) []byte {
	return fmt.Appendf(nil, "k%06d", seq%uint64(c.TaskKeys))
}

// fairDescribe is what the report's config says of the fair-queue flags:
// all three as soon as one is given (--task-keys 0 included), so a keyed
// run and its plain baseline state the same fields; "unchanged" is a
// queue configuration the bench left as it found it.
func (c *Config) fairDescribe(m map[string]any) {
	if !c.fairGiven {
		return
	}
	m["task_keys"] = c.TaskKeys
	m["order"] = cmp.Or(c.Order, "unchanged")
	if c.MaxRunningPerKey != nil {
		m["max_running_per_key"] = *c.MaxRunningPerKey
	} else {
		m["max_running_per_key"] = "unchanged"
	}
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
	perKey := "unchanged"
	if c.MaxRunningPerKey != nil {
		perKey = fmt.Sprint(*c.MaxRunningPerKey)
		if *c.MaxRunningPerKey == 0 {
			perKey = "0 (cleared)"
		}
	}
	return fmt.Sprintf("fair queues: task keys %s, order %s, max running per key %s", keys, cmp.Or(c.Order, "unchanged"), perKey)
}

// fairSetup runs before the workload when a fair-queue flag was given:
// it waits until the cluster latched feature level 16 (a keyed Enqueue or
// a per-key SetQueueLimits is refused before), then sets the queue's
// order and per-key limit if asked.
func (r *runner) fairSetup(ctx context.Context, c *client.Client) error {
	if !r.cfg.fair() {
		return nil
	}
	if err := r.waitLevel(ctx, c, fsm.LevelFairQueues, levelWait); err != nil {
		return err
	}
	l := client.QueueLimits{MaxRunningPerKey: r.cfg.MaxRunningPerKey}
	switch r.cfg.Order {
	case "fifo":
		o := client.OrderFIFO
		l.Order = &o
	case "fair":
		o := client.OrderFair
		l.Order = &o
	}
	if l.Order == nil && l.MaxRunningPerKey == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := c.SetQueueLimits(sctx, r.cfg.Queue, "", l); err != nil {
		return fmt.Errorf("set queue %s's order and per-key limit: %w", r.cfg.Queue, err)
	}
	return nil
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

// parseFair checks the fair-queue flags, fills MaxRunningPerKey when
// --max-running-per-key was given (even as 0, which clears the limit),
// and notes whether any of them was given (fairGiven).
func (c *Config) parseFair(fs *flag.FlagSet, maxPerKey int) []error {
	var errs []error
	if c.TaskKeys < 0 {
		errs = append(errs, fmt.Errorf("--task-keys %d must be >= 0", c.TaskKeys))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	c.fairGiven = given["task-keys"] || given["order"] || given["max-running-per-key"]
	// An --order given empty (an unset variable in a script) is refused,
	// not read as "leave it": the run would not be the one asked for.
	c.Order = strings.ToLower(c.Order)
	if (given["order"] || c.Order != "") && c.Order != "fifo" && c.Order != "fair" {
		errs = append(errs, fmt.Errorf("--order %q: want fifo or fair", c.Order))
	}
	if given["max-running-per-key"] {
		if maxPerKey < 0 || int64(maxPerKey) > math.MaxUint32 {
			errs = append(errs, fmt.Errorf("--max-running-per-key %d: want 0..%d", maxPerKey, uint32(math.MaxUint32)))
		} else {
			v := uint32(maxPerKey)
			c.MaxRunningPerKey = &v
		}
	}
	if c.Workload == "ceiling" && (given["order"] || given["max-running-per-key"]) {
		errs = append(errs, errors.New("--order and --max-running-per-key configure the queue; --workload ceiling has none"))
	}
	if err := c.heldFitsKeyLimit(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// heldFitsKeyLimit refuses a workload that must hold more claims at once
// than the per-key limit it sets lets run: the claims past the limit
// would come back empty and the run would stop half-way through its
// setup, after a fill (keyless tasks are each their own key, so
// unlimited).
func (c *Config) heldFitsKeyLimit() error {
	var held int
	var given string // the flag that set held
	switch c.Workload {
	case "heartbeat":
		held, given = c.Leases, fmt.Sprintf("--leases %d", c.Leases)
	case "requeue":
		held = cmp.Or(c.Count, requeueDefault)
		given = fmt.Sprintf("--count %d", held)
	default:
		return nil
	}
	if c.MaxRunningPerKey == nil || *c.MaxRunningPerKey == 0 || c.TaskKeys == 0 {
		return nil
	}
	if can := int64(c.TaskKeys) * int64(*c.MaxRunningPerKey); int64(held) > can {
		return fmt.Errorf("--workload %s holds %s claims at once, but --task-keys %d × --max-running-per-key %d lets %d run: raise one of them, or hold fewer",
			c.Workload, given, c.TaskKeys, *c.MaxRunningPerKey, can)
	}
	return nil
}
