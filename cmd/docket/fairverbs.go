package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Fair queues (feature level 16): a task's key on enqueue and in the task
// views, the per-key flags of `docket queue limit`, and the verbs
// `docket key-limit` and `docket keys`.
//
// The flag is --task-key, not --key: `docket enqueue --key` has always
// been the idempotency key, and giving an old script's --key a new
// meaning would silently stop deduplicating its retries.

// keyWidth is how much of a key a table shows; --json shows all of it.
const keyWidth = 32

// taskKeyFlag defines enqueue's --task-key.
func taskKeyFlag(fs *flag.FlagSet) *string {
	return fs.String("task-key", "", "the task's key, its unit of fairness (usually the end customer): at most 256 bytes; "+
		"a queue with a per-key limit or the fair order counts and orders its tasks by key (feature level 16)")
}

// printKey shows a task's key in `docket task`, nothing when it has none.
func printKey(w io.Writer, t *pb.Task) {
	if len(t.GetKey()) > 0 {
		fmt.Fprintf(w, "key:       %s\n", cell(string(t.GetKey()), 1<<10))
	}
}

// keyWord is a claimed task's key in `docket claim`'s line, "" when it
// has none.
func keyWord(t *pb.Task) string {
	if len(t.GetKey()) == 0 {
		return ""
	}
	return fmt.Sprintf("key=%q ", t.GetKey())
}

// keyColumn is the KEY column of `docket tasks`: shown only when a listed
// task has a key, so a queue that does not use keys lists as before.
type keyColumn bool

func keyColumnOf(tasks []*pb.Task) keyColumn {
	for _, t := range tasks {
		if len(t.GetKey()) > 0 {
			return true
		}
	}
	return false
}

func (k keyColumn) head() string {
	if !k {
		return ""
	}
	return fmt.Sprintf("%-*s ", keyWidth, "KEY")
}

func (k keyColumn) cell(t *pb.Task) string {
	if !k {
		return ""
	}
	return fmt.Sprintf("%-*s ", keyWidth, cell(string(t.GetKey()), keyWidth))
}

// fairLimitFlags are the per-key flags of `docket queue limit`.
type fairLimitFlags struct {
	fs                   *flag.FlagSet
	maxPerKey, depth     *uint
	order, perKeyPending *string
}

var fairLimitNames = []string{"max-running-per-key", "order", "per-key-pending", "per-key-depth"}

func newFairLimitFlags(fs *flag.FlagSet) *fairLimitFlags {
	return &fairLimitFlags{fs: fs,
		maxPerKey: fs.Uint("max-running-per-key", 0, "limit: at most this many RUNNING tasks of one key (0: no limit; docket key-limit overrides it per key)"),
		order: fs.String("order", "", "limit: fifo (priority, then enqueue order) or fair (priority, then round robin over keys, "+
			"the key with the fewest running first)"),
		perKeyPending: fs.String("per-key-pending", "", "limit: debounce: keep-newest or keep-oldest keeps --per-key-depth pending tasks "+
			"of a key and cancels the others (reason \"debounced\"); all turns it off"),
		depth: fs.Uint("per-key-depth", 0, "limit: how many pending tasks of a key --per-key-pending keeps"),
	}
}

// any reports whether a per-key flag was given.
func (f *fairLimitFlags) any() bool {
	for _, n := range fairLimitNames {
		if flagSet(f.fs, n) {
			return true
		}
	}
	return false
}

// apply sets the given per-key flags on l. --clear leaves the per-key
// rules alone: they need feature level 16, and clearing a rate limit must
// keep working on a cluster that has not latched it. Each is cleared by
// its own flag (--max-running-per-key 0, --order fifo, --per-key-pending
// all).
func (f *fairLimitFlags) apply(l *client.QueueLimits) error {
	if flagSet(f.fs, "max-running-per-key") {
		if *f.maxPerKey > math.MaxUint32 {
			return fmt.Errorf("%w: --max-running-per-key %d is too large", errUsage, *f.maxPerKey)
		}
		l.MaxRunningPerKey = ptr(uint32(*f.maxPerKey))
	}
	if flagSet(f.fs, "order") {
		o := client.OrderFIFO
		switch strings.ToLower(*f.order) {
		case "fifo", "":
		case "fair":
			o = client.OrderFair
		default:
			return fmt.Errorf("%w: --order %q: fifo or fair", errUsage, *f.order)
		}
		l.Order = &o
	}
	if flagSet(f.fs, "per-key-pending") {
		p := client.KeepAllPending
		switch strings.ToLower(*f.perKeyPending) {
		case "all", "":
		case "keep-newest":
			p = client.KeepNewestPending
		case "keep-oldest":
			p = client.KeepOldestPending
		default:
			return fmt.Errorf("%w: --per-key-pending %q: keep-newest, keep-oldest or all", errUsage, *f.perKeyPending)
		}
		l.PerKeyPending = &p
		if p != client.KeepAllPending && !flagSet(f.fs, "per-key-depth") {
			return fmt.Errorf("%w: --per-key-pending %s needs --per-key-depth D (how many pending tasks of a key it keeps)", errUsage, *f.perKeyPending)
		}
	}
	if flagSet(f.fs, "per-key-depth") {
		if *f.depth > math.MaxUint32 {
			return fmt.Errorf("%w: --per-key-depth %d is too large", errUsage, *f.depth)
		}
		l.PerKeyPendingDepth = ptr(uint32(*f.depth))
	}
	return nil
}

// fairLimitsText is what `docket queue limit` says it set of the per-key
// rules.
func fairLimitsText(l client.QueueLimits) []string {
	var parts []string
	if l.MaxRunningPerKey != nil {
		parts = append(parts, "per key "+orNone(uint64(*l.MaxRunningPerKey), strconv.FormatUint(uint64(*l.MaxRunningPerKey), 10)))
	}
	if l.Order != nil {
		parts = append(parts, "order "+orderName(*l.Order))
	}
	switch {
	case l.PerKeyPending != nil && *l.PerKeyPending == client.KeepAllPending:
		parts = append(parts, "debounce off")
	case l.PerKeyPending != nil && l.PerKeyPendingDepth != nil: // apply asks for the depth with a keep rule
		parts = append(parts, fmt.Sprintf("debounce %s %d", pendingName(*l.PerKeyPending), *l.PerKeyPendingDepth))
	case l.PerKeyPendingDepth != nil:
		parts = append(parts, fmt.Sprintf("debounce depth %d", *l.PerKeyPendingDepth))
	}
	return parts
}

func orderName(o pb.QueueOrder) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "QUEUE_ORDER_"))
}

func pendingName(p pb.PerKeyPending) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(p.String(), "PER_KEY_PENDING_")), "_", "-")
}

// keyLimit is `docket key-limit QUEUE KEY [--max-running N] [--weight W]`:
// one key's override of the queue's per-key limit and its fair-order
// weight. A flag not given keeps the key's value; 0 clears it.
func (v *verb) keyLimit(ctx context.Context, args []string) error {
	maxRunning := v.fs.Uint("max-running", 0, "at most this many RUNNING tasks of the key, instead of the queue's --max-running-per-key (0: the queue's)")
	weight := v.fs.Uint("weight", 0, "the key's share of the fair order: weight 2 runs about twice the tasks of weight 1 (0: 1; at most 1000)")
	pos, err := v.parse(args, 2, 2, "QUEUE KEY [--max-running N] [--weight W]")
	if err != nil {
		return err
	}
	var l client.KeyLimit
	if flagSet(v.fs, "max-running") {
		if *maxRunning > math.MaxUint32 {
			return fmt.Errorf("%w: --max-running %d is too large", errUsage, *maxRunning)
		}
		l.MaxRunning = ptr(uint32(*maxRunning))
	}
	if flagSet(v.fs, "weight") {
		if *weight > math.MaxUint32 {
			return fmt.Errorf("%w: --weight %d is too large", errUsage, *weight)
		}
		l.Weight = ptr(uint32(*weight))
	}
	if l.MaxRunning == nil && l.Weight == nil {
		return fmt.Errorf("%w: docket key-limit QUEUE KEY: give --max-running or --weight (0 clears it)", errUsage)
	}
	queue, key := pos[0], pos[1]
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		changed, err := c.SetKeyLimit(ctx, queue, v.c.tenant, key, l)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			name := fmt.Sprintf("%s/%s key %s", queue, v.c.tenant, cell(key, keyWidth))
			if !changed {
				fmt.Fprintf(w, "%s: unchanged\n", name)
				return
			}
			var parts []string
			if l.MaxRunning != nil {
				parts = append(parts, "max running "+orNone(uint64(*l.MaxRunning), strconv.FormatUint(uint64(*l.MaxRunning), 10)))
			}
			if l.Weight != nil {
				parts = append(parts, "weight "+orNone(uint64(*l.Weight), strconv.FormatUint(uint64(*l.Weight), 10)))
			}
			fmt.Fprintf(w, "%s: %s\n", name, strings.Join(parts, ", "))
		}, &pb.SetKeyLimitResponse{Changed: changed})
	})
}

// keys is `docket keys QUEUE [--limit N]`: the queue's top keys by
// backlog and by running, as two tables (--json: the ListKeys answer).
func (v *verb) keys(ctx context.Context, args []string) error {
	limit := v.fs.Uint("limit", 10, "at most this many keys in each table (at most 1000)")
	pos, err := v.parse(args, 1, 1, "QUEUE [--limit N]")
	if err != nil {
		return err
	}
	if *limit > 1000 {
		return fmt.Errorf("%w: --limit %d is over 1000", errUsage, *limit)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		res, err := c.ListKeys(ctx, pos[0], v.c.tenant, uint32(*limit))
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) { keysTables(w, pos[0], v.c.tenant, res) }, res)
	})
}

// keysTables prints a ListKeys answer: a line on the queue, then its top
// keys by backlog and by running.
func keysTables(w io.Writer, queue, tenant string, res *pb.ListKeysResponse) {
	name := queue + "/" + tenant
	if !res.GetKeyed() {
		fmt.Fprintf(w, "%s has no per-key rule (docket queue limit %s --max-running-per-key N or --order fair makes it keyed)\n",
			name, queue)
		return
	}
	fmt.Fprintf(w, "%s: %d keys with a pending or running task\n", name, res.GetKeys())
	for _, t := range []struct {
		title string
		keys  []*pb.KeyStats
	}{{"by backlog", res.GetByBacklog()}, {"by running", res.GetByRunning()}} {
		fmt.Fprintf(w, "\n%s\n%-*s %9s %8s %6s %6s\n", t.title, keyWidth, "KEY", "PENDING", "RUNNING", "LIMIT", "WEIGHT")
		if len(t.keys) == 0 {
			fmt.Fprintln(w, "(none)")
		}
		for _, k := range t.keys {
			lim := "-"
			if k.GetMaxRunning() > 0 {
				lim = strconv.FormatUint(uint64(k.GetMaxRunning()), 10)
			}
			fmt.Fprintf(w, "%-*s %9d %8d %6s %6d\n", keyWidth, cell(string(k.GetKey()), keyWidth), k.GetPending(), k.GetRunning(), lim, max(1, k.GetWeight()))
		}
	}
}
