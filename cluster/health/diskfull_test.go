package health_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// diskFull fails Pebble's sstable writes with ENOSPC while on, as a full
// disk does: the WAL still appends (it reuses space), flushes cannot.
type diskFull struct {
	on   atomic.Bool
	hits atomic.Int64
}

func (d *diskFull) String() string { return "diskFull" }

func (d *diskFull) MaybeError(op errorfs.Op) error {
	if !d.on.Load() || !strings.HasSuffix(op.Path, ".sst") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileSync, errorfs.OpFilePreallocate:
		d.hits.Add(1)
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

// lineCounter is a slog handler that counts records, and those mentioning
// "no space left" in their message or attributes.
type lineCounter struct {
	all, noSpace *atomic.Int64
	attrs        []slog.Attr
}

func newLineCounter() *lineCounter {
	return &lineCounter{all: new(atomic.Int64), noSpace: new(atomic.Int64)}
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.all.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	if strings.Contains(b.String(), "no space left") {
		c.noSpace.Add(1)
	}
	return nil
}

func (c *lineCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineCounter{all: c.all, noSpace: c.noSpace, attrs: append(append([]slog.Attr{}, c.attrs...), as...)}
}
func (c *lineCounter) WithGroup(string) slog.Handler { return c }

func hasProblem(n *cluster.Node, word string) bool {
	for _, p := range n.HealthProblems() {
		if strings.Contains(p, word) {
			return true
		}
	}
	return false
}

// A follower whose Pebble cannot flush (disk full) stalls in Commit. It
// must say so in its health within the apply-lag bound, log the failure a
// few times rather than once per retry, and recover when space returns.
func Test_FollowerDiskFullIsUnhealthyAndQuiet(t *testing.T) {
	full := &diskFull{}
	lines := newLineCounter()
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) {
		c.ApplyLagBound = 300 * time.Millisecond
		if c.ID == "n3" {
			c.Logger = slog.New(lines)
			c.EditFSMOptions = func(o *fsm.Options) {
				o.FS = errorfs.Wrap(vfs.Default, full)
				o.MemTableBytes = 1 << 20 // stalls once 2 MiB wait for a flush
			}
		}
	})
	// Cleanups run last-first: this one runs before the nodes shut down,
	// so n3's stalled apply can finish and Raft can stop.
	t.Cleanup(func() { full.on.Store(false) })
	l, n3 := nodes[0], nodes[2]
	if p := n3.HealthProblems(); len(p) != 0 {
		t.Fatalf("n3 unhealthy before the fault: %q", p)
	}

	full.on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	payload := strings.Repeat("x", 64<<10)
	for i := 0; i < 64; i++ { // 4 MiB: twice what n3 holds before it stalls
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload)); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	// Pebble retries a failed flush at once: let it fail many times.
	testwait.For(t, 10*time.Second, "200 failed sstable writes on n3", func() bool { return full.hits.Load() >= 200 })
	if got := lines.noSpace.Load(); got > 5 {
		t.Errorf("n3 logged %d lines about no space after %d failed writes; want at most 5", got, full.hits.Load())
	}
	testwait.For(t, 5*time.Second, "n3 health reports the Pebble error and the stuck apply", func() bool {
		return hasProblem(n3, "pebble") && hasProblem(n3, "apply")
	})
	t.Logf("n3 problems: %q; failed writes %d, log lines %d (no space: %d)",
		n3.HealthProblems(), full.hits.Load(), lines.all.Load(), lines.noSpace.Load())

	full.on.Store(false)
	testwait.For(t, 10*time.Second, "n3 applies what the leader applied", func() bool {
		return n3.FSM().AppliedIndex() >= l.FSM().AppliedIndex()
	})
	testwait.For(t, 10*time.Second, "n3 healthy again", func() bool { return len(n3.HealthProblems()) == 0 })
}

// A leader that cannot write its log steps down, and its callers get
// leadership-lost (Unavailable, retried by the client for safe calls), not
// an unclassified error that transport reports as Internal.
func Test_LeaderLogWriteFailureStepsDown(t *testing.T) {
	nodes, logsOf := nodetest.ClusterFailingLogs(t)
	l := nodetest.LeaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "before")); err != nil {
		t.Fatalf("propose before the fault: %v", err)
	}

	bad := logsOf(l.ID())
	bad.On.Store(true)
	t.Cleanup(func() { bad.On.Store(false) })
	_, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "lost"))
	if !errors.Is(err, replica.ErrLeadershipLost) {
		t.Fatalf("propose on a leader whose log write fails: %v; want replica.ErrLeadershipLost", err)
	}
	// raft's LogCache flattens the disk's error to text; the guard above
	// it tags it.
	if !errors.Is(err, health.ErrLogWrite) || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("error %q does not carry health.ErrLogWrite and the disk's error", err)
	}
	if !hasProblem(l, "raft log") {
		t.Errorf("health of the failing leader: %q; want a raft log problem", l.HealthProblems())
	}
	testwait.For(t, 5*time.Second, "a healthy leader elsewhere", func() bool {
		for _, n := range nodes {
			if n != l && n.IsLeader() {
				return true
			}
		}
		return false
	})

	bad.On.Store(false)
	nl := nodetest.LeaderOf(t, nodes)
	if _, err := nl.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after")); err != nil {
		t.Fatalf("propose on the new leader: %v", err)
	}
	testwait.For(t, 5*time.Second, "the old leader healthy again", func() bool { return len(l.HealthProblems()) == 0 })
}

// A leader whose Pebble is full stalls its apply, so no Propose on it can
// finish, while its heartbeats keep the others from electing. Without help
// the cluster takes no write until the disk is freed; the node must hand
// leadership over and say NOT_SERVING.
func Test_LeaderPebbleFullHandsOverLeadership(t *testing.T) {
	full := &diskFull{}
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) {
		c.ApplyLagBound = 300 * time.Millisecond
		if c.ID == "n1" {
			c.EditFSMOptions = func(o *fsm.Options) {
				o.FS = errorfs.Wrap(vfs.Default, full)
				o.MemTableBytes = 1 << 20
			}
		}
	})
	t.Cleanup(func() { full.on.Store(false) })
	n1 := nodes[0]
	full.on.Store(true)
	payload := strings.Repeat("x", 64<<10)
	stalled := false
	for i := 0; i < 64 && !stalled; i++ { // 4 MiB: twice what n1 holds before it stalls
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := n1.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload))
		cancel()
		stalled = err != nil
	}
	if !stalled {
		t.Fatalf("n1 applied 4 MiB with every flush failing")
	}
	var nl *cluster.Node
	testwait.For(t, 10*time.Second, "another node leads", func() bool {
		for _, n := range nodes[1:] {
			if n.IsLeader() {
				nl = n
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nl.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after")); err != nil {
		t.Fatalf("propose on the new leader %s: %v", nl.ID(), err)
	}
	if !hasProblem(n1, "apply stuck") {
		t.Errorf("n1 health %q; want apply stuck", n1.HealthProblems())
	}
	full.on.Store(false)
	testwait.For(t, 10*time.Second, "n1 healthy again", func() bool { return len(n1.HealthProblems()) == 0 })
}

// Under steady load the stalled leader's apply queue fills and Raft's main
// loop blocks on it, so a leadership transfer cannot even start: the node
// must shut its Raft down so that the others elect.
func Test_LoadedLeaderPebbleFullLetsOthersLead(t *testing.T) {
	full := &diskFull{}
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) {
		c.ApplyLagBound = time.Second
		// One entry per apply batch: Raft's apply queue (128 batches) then
		// fills well within the bound.
		c.MaxAppendEntries = 1
		if c.ID == "n1" {
			c.EditFSMOptions = func(o *fsm.Options) {
				o.FS = errorfs.Wrap(vfs.Default, full)
				o.MemTableBytes = 1 << 20
			}
		}
	})
	t.Cleanup(func() { full.on.Store(false) })
	n1 := nodes[0]
	full.on.Store(true)
	// 16 proposers keep n1 busy (bounded in count and time) until another
	// node leads.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	payload := strings.Repeat("x", 16<<10)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				_, err := n1.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload))
				cancel()
				if err != nil && !n1.IsLeader() {
					return
				}
				sent.Add(1)
			}
		}()
	}
	var nl *cluster.Node
	testwait.For(t, 15*time.Second, "another node leads", func() bool {
		for _, n := range nodes[1:] {
			if n.IsLeader() {
				nl = n
				return true
			}
		}
		return false
	})
	close(stop)
	wg.Wait()
	t.Logf("%d proposals to n1; n1 problems %q", sent.Load(), n1.HealthProblems())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nl.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after")); err != nil {
		t.Fatalf("propose on the new leader %s: %v", nl.ID(), err)
	}
	if len(n1.HealthProblems()) == 0 {
		t.Errorf("n1 healthy while its apply is stuck")
	}
}
