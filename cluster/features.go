package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// ErrFeatureDisabled means a command needs a feature level the cluster has
// not latched yet: some server in the configuration runs a build that
// would not apply it. Nothing was proposed. Errors carrying it are
// *FeatureError.
var ErrFeatureDisabled = errors.New("feature not enabled on this cluster")

// FeatureError is ErrFeatureDisabled with what is missing.
type FeatureError struct {
	Command pb.CommandType
	Need    uint32 // the level the command needs
	Enabled uint32 // the level the cluster latched
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("%v needs feature level %d; the cluster has enabled %d: upgrade every server to a build with level %d (docket cluster status shows each server's level)",
		e.Command, e.Need, e.Enabled, e.Need)
}

// Is makes errors.Is(err, ErrFeatureDisabled) true.
func (e *FeatureError) Is(target error) bool { return target == ErrFeatureDisabled }

// enabledLevel is the level the leader may propose at: the latch, and
// never below the base level, which every build applies.
func (n *Node) enabledLevel() uint32 { return max(n.fsm.EnabledLevel(), fsm.LevelBase) }

// apply is the one way the Service proposes: it refuses a command whose
// level is not latched, and while Batch is not latched it runs a Batch's
// commands as entries of their own, so SubmitBatch keeps working on a
// cluster that has an older server.
func (s *Service) apply(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	enabled := s.r.enabledLevel()
	if cmd.GetType() == pb.CommandType_COMMAND_TYPE_BATCH && enabled < fsm.LevelBatch {
		return s.applyEach(ctx, cmd.GetBatch().GetCommands())
	}
	if need := fsm.CommandLevel(cmd); need > enabled && !s.awaitLatch(ctx, need) {
		return nil, &FeatureError{Command: cmd.GetType(), Need: need, Enabled: s.r.enabledLevel()}
	}
	res, err := s.r.apply(ctx, cmd)
	if err == nil {
		s.metrics.observe(cmd, res)
	}
	return res, err
}

// latchWaitMax bounds how long a command waits for a latch that every
// server already supports: a new cluster's leader latches within a
// latchInterval of its election.
const latchWaitMax = 3 * latchInterval

// awaitLatch waits, up to latchWaitMax, for the cluster to latch level
// need when every server in the configuration announced it, and reports
// whether it did. Without it, a command sent right after a new cluster
// elected its leader (the README tour's first pause) failed as if some
// server ran an old build (seen as Test_CLIQueueControl under load). With
// a server truly behind, it answers at once.
func (s *Service) awaitLatch(ctx context.Context, need uint32) bool {
	if !s.r.latchPending(need) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, latchWaitMax)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.r.enabledLevel() < need {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// latchPending reports whether every server in the configuration
// announced level need (levelTarget), so the leader latches it soon.
func (n *Node) latchPending(need uint32) bool {
	if need > n.fsm.MaxLevel() {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	target, _ := levelTarget(f.Configuration(), n.cfg.ID, n.fsm.MaxLevel(), func(id string) uint32 {
		p, _ := n.peers.get(id)
		return p.Level
	})
	return target >= need
}

// applyEach proposes cmds concurrently, one entry each, and answers as the
// Batch of them would: one result per command. Raft still shares appends
// and fsyncs between the entries (BatchApplyCh). Any error is the whole
// answer's, as a lost Batch's. When some entries applied and another
// failed, even with "not leader" (nothing proposed for it), the answer is
// ErrLeadershipLost: the callers must not take it as "nothing was done"
// and retry a Claim or Nack that did apply.
func (s *Service) applyEach(ctx context.Context, cmds []*pb.Command) (*pb.CommandResult, error) {
	out := &pb.CommandResult{Results: make([]*pb.CommandResult, len(cmds))}
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Results[i], errs[i] = s.apply(ctx, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if slices.Contains(errs, nil) {
			return nil, fmt.Errorf("%w: part of a batch applied: %w", ErrLeadershipLost, err)
		}
		return nil, err
	}
	for _, r := range out.Results {
		out.Index, out.Now = max(out.Index, r.GetIndex()), max(out.Now, r.GetNow())
	}
	return out, nil
}

// levelTarget is the highest level every server in cfg announced: what the
// leader may latch. A server that never announced (not seen yet, or a
// build before feature levels) counts as 0, so it holds the latch where
// it is; so does a server that cannot be reached now, at the level it last
// announced. The second result names the servers below the next level,
// for the status and the log.
func levelTarget(cfg raft.Configuration, self string, own uint32, levels func(id string) uint32) (uint32, []string) {
	target := own
	for _, srv := range cfg.Servers {
		if id := string(srv.ID); id != self {
			target = min(target, levels(id))
		}
	}
	var behind []string
	for _, srv := range cfg.Servers {
		id, l := string(srv.ID), own
		if id != self {
			l = levels(id)
		}
		if l <= target {
			behind = append(behind, fmt.Sprintf("%s@%d", id, l))
		}
	}
	sort.Strings(behind)
	return target, behind
}

// latchOnce proposes SetFeatureLevel when every server in the
// configuration announced a level above the latch. The leader runs it
// after its Barrier and then on an interval; a latch is one small entry.
func (n *Node) latchOnce(ctx context.Context) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	target, behind := levelTarget(f.Configuration(), n.cfg.ID, n.fsm.MaxLevel(), func(id string) uint32 {
		p, _ := n.peers.get(id)
		return p.Level
	})
	enabled := n.fsm.EnabledLevel()
	if target <= enabled {
		if enabled < n.fsm.MaxLevel() && n.latchWait.CompareAndSwap(false, true) {
			n.log.Info("feature level held back by servers on older builds", "enabled", enabled,
				"this_build", n.fsm.MaxLevel(), "servers_at_or_below", behind)
		}
		return nil
	}
	if _, err := n.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: target}}}); err != nil {
		return fmt.Errorf("latch feature level %d: %w", target, err)
	}
	n.latchWait.Store(false)
	n.log.Info("feature level enabled", "level", target, "was", enabled)
	return nil
}

// latchInterval is how often the leader looks for a feature level to
// latch, and how often a command waiting for one retries.
const latchInterval = time.Second
