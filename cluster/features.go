package cluster

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// EnabledLevel is the level the leader may propose at: the latch, and
// never below the base level, which every build applies.
func (n *Node) EnabledLevel() uint32 { return max(n.fsm.EnabledLevel(), fsm.LevelBase) }

// LatchPending reports whether every server in the configuration
// announced level need (levelTarget), so the leader latches it soon.
func (n *Node) LatchPending(need uint32) bool {
	if need > n.fsm.MaxLevel() {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	target, _ := levelTarget(f.Configuration(), n.cfg.ID, n.fsm.MaxLevel(), func(id string) uint32 {
		p, _ := n.peers.Get(id)
		return p.Level
	})
	return target >= need
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
		p, _ := n.peers.Get(id)
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
