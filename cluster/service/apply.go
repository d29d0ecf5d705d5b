package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dockethq/docket/cluster/replica"
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

// apply is the one way the Service proposes: it refuses a command whose
// level is not latched, and while Batch is not latched it runs a Batch's
// commands as entries of their own, so SubmitBatch keeps working on a
// cluster that has an older server.
func (s *Service) apply(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	enabled := s.r.EnabledLevel()
	if cmd.GetType() == pb.CommandType_COMMAND_TYPE_BATCH && enabled < fsm.LevelBatch {
		return s.applyEach(ctx, cmd.GetBatch().GetCommands())
	}
	if need := fsm.CommandLevel(cmd); need > enabled && !s.awaitLatch(ctx, need) {
		return nil, &FeatureError{Command: cmd.GetType(), Need: need, Enabled: s.r.EnabledLevel()}
	}
	res, err := s.r.Apply(ctx, cmd)
	if err == nil {
		s.metrics.observe(cmd, res)
	}
	return res, err
}

// latchWaitMax bounds how long a command waits for a latch that every
// server already supports: a new cluster's leader latches within a
// latchInterval of its election.
const latchWaitMax = 3 * LatchInterval

// awaitLatch waits, up to latchWaitMax, for the cluster to latch level
// need when every server in the configuration announced it, and reports
// whether it did. Without it, a command sent right after a new cluster
// elected its leader (the README tour's first pause) failed as if some
// server ran an old build (seen as Test_CLIQueueControl under load). With
// a server truly behind, it answers at once.
func (s *Service) awaitLatch(ctx context.Context, need uint32) bool {
	if !s.r.LatchPending(need) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, latchWaitMax)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.r.EnabledLevel() < need {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// applyEach proposes cmds concurrently, one entry each, and answers as the
// Batch of them would: one result per command. Raft still shares appends
// and fsyncs between the entries (BatchApplyCh). Any error is the whole
// answer's, as a lost Batch's. When some entries applied and another
// failed, even with "not leader" (nothing proposed for it), the answer is
// replica.ErrLeadershipLost: the callers must not take it as "nothing was done"
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
			return nil, fmt.Errorf("%w: part of a batch applied: %w", replica.ErrLeadershipLost, err)
		}
		return nil, err
	}
	for _, r := range out.Results {
		out.Index, out.Now = max(out.Index, r.GetIndex()), max(out.Now, r.GetNow())
	}
	return out, nil
}

// LatchInterval is how often the leader looks for a feature level to
// latch, and how often a command waiting for one retries.
const LatchInterval = time.Second
