package check

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The leader's side of the consistency check: its loop, one check from
// the proposal to the voters' hashes, and the asking for them.

// Poke asks the leader's check loop for a check soon (a voter reports it
// is awaiting one). It never blocks.
func (c *Checker) Poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Loop runs the leader's consistency checks: one as soon as it leads
// (a node that just restarted may lead and must not serve from an unchecked
// keyspace for long), then every CheckInterval (longer after a long check:
// nextCheckWait), and sooner when a voter reports it awaits one.
func (c *Checker) Loop(ctx context.Context) {
	if c.cfg.CheckInterval < 0 {
		return
	}
	urgent := true // a new leader's first check: a restarted node may wait on it
	for {
		wait := c.cfg.CheckInterval
		started := time.Now()
		err := c.CheckOnce(ctx, urgent)
		if !errors.Is(err, errCheckNotRun) {
			urgent = false // taken by the Check entry; a check that did not run leaves it for the retry
		}
		switch {
		case err == nil:
			wait = nextCheckWait(wait, time.Since(started))
		case ctx.Err() != nil:
		case errors.Is(err, ErrChecksUnsupported):
			c.log.Debug("consistency check postponed", "err", err)
			wait = min(wait, checkRetry)
		case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrShutdown):
		default:
			c.log.Warn("consistency check failed to run", "err", err)
			wait = min(wait, checkRetry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-c.wake:
			t.Stop()
			urgent = true
			if !replica.Sleep(ctx, time.Until(started.Add(min(checkPokeGap, c.cfg.CheckInterval)))) {
				return
			}
		}
	}
}

// CheckOnce proposes a Check, collects the voters' hashes at its index and
// records the majority's hash with a CheckResult. Without a majority (too
// few voters answered, or they disagree) nothing is recorded.
func (c *Checker) CheckOnce(ctx context.Context, urgent bool) error {
	if enabled := c.h.EnabledLevel(); enabled < fsm.LevelCheck {
		return fmt.Errorf("%w: %w: the cluster enabled feature level %d, checks need %d", errCheckNotRun, ErrChecksUnsupported, enabled, fsm.LevelCheck)
	}
	res, err := c.h.Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: urgent}}})
	if err != nil {
		return fmt.Errorf("%w: propose check: %w", errCheckNotRun, err)
	}
	index := res.GetIndex()
	voters := c.h.Voters()
	need := len(voters)/2 + 1
	hashes := c.collectHashes(ctx, index, voters, need)
	counts := map[string]int{}
	for _, h := range hashes {
		counts[h]++
	}
	var majority string
	for h, c := range counts {
		if c >= need {
			majority = h
		}
	}
	if majority == "" {
		if len(hashes) >= need {
			c.log.Error("consistency check: voters disagree and no majority agrees; nothing recorded", "check_index", index, "hashes", hashes)
		} else {
			c.log.Warn("consistency check: too few voters reported a hash", "check_index", index, "reported", len(hashes), "need", need)
		}
		return nil
	}
	var dissent []string
	for id, h := range hashes {
		if h != majority {
			dissent = append(dissent, id)
		}
	}
	sort.Strings(dissent)
	if len(dissent) > 0 {
		c.log.Error("consistency check: voters differ from the majority", "check_index", index, "diverged", dissent)
	}
	_, err = c.h.Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK_RESULT, Body: &pb.Command_CheckResult{CheckResult: &pb.CheckResultCmd{
		CheckIndex: index, Hash: majority, Agreeing: uint32(counts[majority]), Voters: uint32(len(voters)),
	}}})
	if err != nil {
		return fmt.Errorf("propose check result at %d: %w", index, err)
	}
	return nil
}

// collectHashes asks every voter for its hash at index until a majority
// agrees, all answered, or CheckTimeout passes after the leader's own hash
// at index is done: the voters hash the same keyspace at the same pace
// (CheckRate), so a keyspace too large to hash within CheckTimeout still
// gets its check. It returns hashes by voter id. A voter that had not
// answered still compares its own hash when it applies the result.
func (c *Checker) collectHashes(ctx context.Context, index uint64, voters []string, need int) map[string]string {
	deadline := time.Now().Add(c.cfg.CheckTimeout)
	got := map[string]string{}
	for {
		counts := map[string]int{}
		for _, id := range voters {
			if _, ok := got[id]; !ok {
				if h := c.peerHash(ctx, id, index); h != "" {
					got[id] = h
				}
			}
		}
		for _, h := range got {
			counts[h]++
			if counts[h] >= need {
				return got
			}
		}
		if len(got) == len(voters) {
			return got
		}
		if c.HashPending(index) {
			deadline = time.Now().Add(c.cfg.CheckTimeout)
		}
		if time.Now().After(deadline) || !replica.Sleep(ctx, checkPoll) {
			return got
		}
	}
}

// peerHash is one voter's hash at index, "" when it has none yet or cannot
// be reached.
func (c *Checker) peerHash(ctx context.Context, id string, index uint64) string {
	if id == c.cfg.ID {
		return c.HashAt(index)
	}
	return c.h.PeerHash(ctx, id, index)
}
