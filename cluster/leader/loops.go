package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Batch sizes of the leader's housekeeping commands.
const (
	reapBatch    = 1000
	promoteBatch = 1000
	purgeBatch   = 1000
)

// Host is what the loops need from the node they run on: its Service to
// propose through, its replica to read and its clock.
type Host interface {
	// Propose runs a command through the node's group commit.
	Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error)
	// Bootstrap creates the bootstrap token with secret
	// (service.ErrBootstrapped when the cluster has one).
	Bootstrap(ctx context.Context, secret string) error
	FSM() *fsm.FSM
	Now() time.Time
	EnabledLevel() uint32
}

// Config tunes the loops; every interval must be positive.
type Config struct {
	Log              *slog.Logger
	ApplyTimeout     time.Duration // bounds each command
	ReapInterval     time.Duration // the reaper and the execution timeouts
	ReapGrace        time.Duration // a new leader reaps only after it
	PromoteInterval  time.Duration // the delayed-task mover
	PurgeInterval    time.Duration // retention
	ScheduleInterval time.Duration
	BootstrapSecret  string // the bootstrap token's secret, "" for none
}

// Loops are one leader's housekeeping: the reaper, execution timeouts,
// the delayed-task mover, the retention purge, the scheduler and the
// bootstrap token. Each proposes commands built from the leader's own
// replica and clock; the FSM re-checks every one in apply, so a loop run
// twice, late or by a deposed leader changes nothing it should not.
type Loops struct {
	h   Host
	cfg Config
	log *slog.Logger
}

// New returns the loops of a node; Run starts them.
func New(h Host, cfg Config) *Loops {
	return &Loops{h: h, cfg: cfg, log: cfg.Log}
}

// Task is a periodic job of the node's own that runs beside the loops
// (the feature-level latch), and Loop one that paces itself (membership
// reconcile, the consistency check); both end when Run's ctx does.
type Task struct {
	Name  string
	Every time.Duration
	Run   func(context.Context) error
}

// Run runs the loops, the tasks and the extra loops until ctx ends, then
// waits for all of them. The reaper and the timeouts wait out ReapGrace
// first: a new leader's clock may run ahead of the last one's.
func (l *Loops) Run(ctx context.Context, tasks []Task, loops ...func(context.Context)) {
	reapAfter := time.Now().Add(l.cfg.ReapGrace)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.bootstrapToken(ctx)
	}()
	afterGrace := func(fn func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			if time.Now().Before(reapAfter) {
				return nil
			}
			return fn(ctx)
		}
	}
	all := append([]Task{
		{"reap", l.cfg.ReapInterval, afterGrace(l.reapOnce)},
		{"timeout", l.cfg.ReapInterval, afterGrace(l.timeOutOnce)},
		{"promote", l.cfg.PromoteInterval, l.promoteOnce},
		{"purge", l.cfg.PurgeInterval, l.purgeOnce},
		{"schedule", l.cfg.ScheduleInterval, l.ScheduleOnce},
	}, tasks...)
	for _, t := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.every(ctx, t)
		}()
	}
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	wg.Wait()
}

// every runs t on its interval until ctx ends, logging failures other
// than losing leadership.
func (l *Loops) every(ctx context.Context, t Task) {
	tick := time.NewTicker(t.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := t.Run(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrShutdown) {
			l.log.Warn("leader task failed", "task", t.Name, "err", err)
		}
	}
}

// propose runs a housekeeping command with a bounded wait and turns a
// whole-command rejection into an error.
func (l *Loops) propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	return Propose(ctx, l.h, l.cfg.ApplyTimeout, cmd)
}

// Propose runs cmd through p within timeout and turns a whole-command
// rejection into an error: how a node proposes what it decides itself.
func Propose(ctx context.Context, p interface {
	Propose(context.Context, *pb.Command) (*pb.CommandResult, error)
}, timeout time.Duration, cmd *pb.Command) (*pb.CommandResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := p.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, pb.ResultError(res)
}

// bootstrapToken creates the bootstrap token when this node has a secret
// and the cluster never created one; otherwise it says why it ignores it.
// Tokens need their feature level: until the cluster latched it (every
// server announced it), it waits.
func (l *Loops) bootstrapToken(ctx context.Context) {
	if l.cfg.BootstrapSecret == "" {
		return
	}
	var err error
	for {
		err = l.h.Bootstrap(ctx, l.cfg.BootstrapSecret)
		if !errors.Is(err, service.ErrFeatureDisabled) {
			break
		}
		if !replica.Sleep(ctx, service.LatchInterval) {
			return
		}
	}
	switch {
	case err == nil:
		l.log.Info("bootstrap token created")
	case errors.Is(err, service.ErrBootstrapped):
		l.log.Info("bootstrap token ignored: this cluster created its bootstrap token before")
	case ctx.Err() == nil:
		l.log.Error("bootstrap token not created", "err", err)
	}
}

// reapOnce proposes Reap for the leases that expired by the leader's now.
// The FSM re-checks each fence and expiry, so a heartbeat that lands
// between this scan and the apply wins.
func (l *Loops) reapOnce(ctx context.Context) error {
	items, err := l.h.FSM().ExpiredLeases(l.h.Now().UnixNano(), reapBatch)
	if err != nil || len(items) == 0 {
		return err
	}
	res, err := l.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_REAP,
		Body: &pb.Command_Reap{Reap: &pb.ReapCmd{Items: items}},
	})
	if err != nil {
		return err
	}
	reaped := 0
	for _, it := range res.GetItems() {
		if it.GetCode() == pb.Code_CODE_OK {
			reaped++
		}
	}
	l.log.Info("reaped expired leases", "seen", len(items), "requeued", reaped)
	return nil
}

func (l *Loops) promoteOnce(ctx context.Context) error {
	delayed, _, err := l.h.FSM().HasDue(l.h.Now().UnixNano())
	if err != nil || !delayed {
		return err
	}
	_, err = l.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED,
		Body: &pb.Command_PromoteDelayed{PromoteDelayed: &pb.PromoteDelayedCmd{Limit: promoteBatch}},
	})
	return err
}

// purgeOnce purges the tasks whose retention has passed, and the
// dependency tombstones whose time ended, a Purge of purgeBatch of each at
// a time, until nothing expired is left or the round has run for its
// interval (at least a second); the next round goes on. One Purge a round
// purged at most 200 tasks a second at the default 5 s interval, less than
// a busy queue finishes, and finished tasks (their records, their expiry
// and idempotency entries in memory) piled up without bound. A Purge's
// answer lists the tasks it purged, not the tombstones, so a short answer
// does not end the round: HasDue, which sees both, does.
func (l *Loops) purgeOnce(ctx context.Context) error {
	until := time.Now().Add(max(l.cfg.PurgeInterval, time.Second))
	for {
		_, expired, err := l.h.FSM().HasDue(l.h.Now().UnixNano())
		if err != nil || !expired {
			return err
		}
		if _, err := l.propose(ctx, &pb.Command{
			Type: pb.CommandType_COMMAND_TYPE_PURGE,
			Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: purgeBatch}},
		}); err != nil || time.Now().After(until) {
			return err
		}
	}
}
