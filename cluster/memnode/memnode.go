// Package memnode is a one-node, in-memory stand-in for a cluster.Node,
// for tests of the layers above cluster: the real Service and FSM, with
// Raft replaced by an apply on the caller's goroutine.
package memnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Node is a one-node stand-in for a cluster.Node over a real FSM, for tests of
// the layers above cluster: a proposal applies at once, with increasing
// indexes, on the caller's goroutine. It has the same Service as a Node,
// so group commit, long polls and reads run the production code; only
// Raft is replaced. As a follower it refuses writes and names a leader
// address, so two MemNodes behind real gRPC servers test forwarding. Its
// knobs (Fail, Hold, ApplyLate, SetProblems, SetCheckErr) make the
// outcomes a real cluster gives under faults. hashicorp/raft ships its
// in-memory transport and stores for the same reason.
type Node struct {
	svc *service.Service // the production Service over this member

	fsm    *fsm.FSM
	limits fsm.Limits

	mu       sync.Mutex // one apply at a time, like Raft's apply goroutine
	index    uint64
	proposed map[pb.CommandType]int
	batched  map[pb.CommandType]int // commands inside Batch entries

	leader     atomic.Bool
	leaderAddr atomic.Pointer[string]
	failNext   atomic.Pointer[error]
	hold       atomic.Pointer[chan struct{}]
	held       atomic.Int32
	removed    atomic.Pointer[string]
	applyLate  atomic.Bool
	problems   atomic.Pointer[[]string]
	checkErr   atomic.Pointer[error]
	level      atomic.Uint32 // the enabled feature level; 0 means the build's
	pending    atomic.Uint32 // the level every server announced (SetLatchPending)
	ident      *peer.Identity
	clock      atomic.Pointer[func() time.Time] // SetClock; nil: the wall clock
}

// NewMemNode opens an FSM under dir and serves it as a leader or a
// follower. Close closes both.
func New(dir string, leader bool, cfg service.ServiceConfig) (*Node, error) {
	f, err := fsm.Open(dir, fsm.Options{})
	if err != nil {
		return nil, err
	}
	n := &Node{fsm: f, limits: fsm.DefaultLimits(), proposed: map[pb.CommandType]int{}, batched: map[pb.CommandType]int{}}
	n.ident = peer.NewIdentity(f.ClusterID, slog.Default())
	n.leader.Store(leader)
	n.SetLeaderAddr("")
	n.svc = service.New(n, cfg)
	return n, nil
}

// SetEnabledLevel sets the feature level the replica proposes at, as a
// cluster's latch would; 0 restores the build's level. A MemNode is one
// server of the build under test, so by default all of it is enabled.
func (n *Node) SetEnabledLevel(l uint32) { n.level.Store(l) }

// SetLatchPending makes the replica say every server announced level l,
// as a cluster whose leader is about to latch it; 0 (the default): none.
func (n *Node) SetLatchPending(l uint32) { n.pending.Store(l) }

func (n *Node) LatchPending(need uint32) bool { return need <= n.pending.Load() }

// leaderCaughtUp is true: a MemNode applies every command as it is proposed.
func (n *Node) LeaderCaughtUp() bool { return true }

func (n *Node) EnabledLevel() uint32 {
	if l := n.level.Load(); l != 0 {
		return l
	}
	return n.fsm.MaxLevel()
}

// Close stops the service and closes the FSM. It waits for the proposals
// in flight, so a Hold must be released first.
func (n *Node) Close() error {
	n.svc.Close()
	return n.fsm.Close()
}

// SetLimits sets the edge bounds requests are checked with.
func (n *Node) SetLimits(l fsm.Limits) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.limits = l
}

// SetLeader makes the node lead, or follow.
func (n *Node) SetLeader(v bool) { n.leader.Store(v) }

// SetLeaderAddr sets the gRPC address the node names as the leader's.
func (n *Node) SetLeaderAddr(a string) { n.leaderAddr.Store(&a) }

// Fail makes the next proposal fail with err, nothing applied.
func (n *Node) Fail(err error) { n.failNext.Store(&err) }

// FailArmed reports whether a Fail waits for the next proposal.
func (n *Node) FailArmed() bool { return n.failNext.Load() != nil }

// Hold makes proposals wait until the returned release is called.
func (n *Node) Hold() (release func()) {
	ch := make(chan struct{})
	n.hold.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			n.hold.Store(nil)
			close(ch)
		})
	}
}

// Held is how many proposals wait on Hold.
func (n *Node) Held() int { return int(n.held.Load()) }

// ApplyLate makes a proposal whose ctx ended while it was held apply
// anyway and answer the ctx error: what a Raft entry already appended does.
func (n *Node) ApplyLate(v bool) { n.applyLate.Store(v) }

// SetProblems sets what HealthProblems answers.
func (n *Node) SetProblems(p []string) { n.problems.Store(&p) }

// SetCheckErr sets what CheckErr answers; nil means serving.
func (n *Node) SetCheckErr(err error) {
	if err == nil {
		n.checkErr.Store(nil)
		return
	}
	n.checkErr.Store(&err)
}

// Proposed counts the entries of type t proposed.
func (n *Node) Proposed(t pb.CommandType) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proposed[t]
}

// Runs counts the commands of type t, alone or inside a Batch entry.
func (n *Node) Runs(t pb.CommandType) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proposed[t] + n.batched[t]
}

// Removed is the id of the last RemoveServer.
func (n *Node) Removed() string {
	if p := n.removed.Load(); p != nil {
		return *p
	}
	return ""
}

func (n *Node) notLeader() error { return &replica.NotLeaderError{LeaderGRPC: n.LeaderGRPCAddr()} }

func (n *Node) Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	if !n.IsLeader() {
		return nil, n.notLeader()
	}
	if e := n.failNext.Swap(nil); e != nil {
		return nil, *e
	}
	if h := n.hold.Load(); h != nil {
		n.held.Add(1)
		<-*h
		n.held.Add(-1)
	}
	late := ctx.Err()
	if late != nil && !n.applyLate.Load() {
		return nil, late
	}
	cmd.Now = n.Now().UnixNano()
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.index++
	n.proposed[cmd.GetType()]++
	for _, sub := range cmd.GetBatch().GetCommands() {
		n.batched[sub.GetType()]++
	}
	res, _ := n.fsm.Apply(&raft.Log{Index: n.index, Term: 1, Type: raft.LogCommand, Data: data}).(*pb.CommandResult)
	if late != nil {
		return nil, late // applied, but the answer is lost, as with Raft
	}
	return res, nil
}

// CheckErr is what SetCheckErr set.
func (n *Node) CheckErr() error {
	if p := n.checkErr.Load(); p != nil {
		return *p
	}
	return nil
}

// CheckHash knows no checks.
func (n *Node) CheckHash(uint64) string { return "" }

// IsLeader reports what SetLeader set.
func (n *Node) IsLeader() bool { return n.leader.Load() }

// LeaderGRPCAddr is what SetLeaderAddr set.
func (n *Node) LeaderGRPCAddr() string { return *n.leaderAddr.Load() }

// FSM is the node's replica.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Limits are fsm.DefaultLimits, or what SetLimits set.
func (n *Node) Limits() fsm.Limits {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.limits
}

// Now is the wall clock, or the clock SetClock gave.
func (n *Node) Now() time.Time {
	if c := n.clock.Load(); c != nil {
		return (*c)()
	}
	return time.Now()
}

// SetClock makes now the node's clock: the time it stamps on commands
// and the leader loops read, so a test can move time at will.
func (n *Node) SetClock(now func() time.Time) { n.clock.Store(&now) }

// HealthProblems is what SetProblems set.
func (n *Node) HealthProblems() []string {
	if p := n.problems.Load(); p != nil {
		return *p
	}
	return nil
}

// ReadBarrier succeeds on a leader, whose FSM is always current.
func (n *Node) ReadBarrier(context.Context) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	return nil
}

// StatusWithHash describes the node.
func (n *Node) StatusWithHash(withHash bool) (*pb.StatusResponse, error) {
	st := &pb.StatusResponse{NodeId: "mem", State: "Follower", LeaderGrpcAddr: n.LeaderGRPCAddr(),
		FsmAppliedIndex: n.fsm.AppliedIndex()}
	if n.IsLeader() {
		st.State = "Leader"
	}
	if withHash {
		h, err := n.fsm.Hash()
		if err != nil {
			return nil, err
		}
		st.KeyspaceHash = h
	}
	return st, nil
}

// TransferLeadership answers "to-<id>" on a leader.
func (n *Node) TransferLeadership(_ context.Context, toID string) (string, error) {
	if !n.IsLeader() {
		return "", n.notLeader()
	}
	return "to-" + toID, nil
}

// AddServer succeeds on a leader and changes nothing.
func (n *Node) AddServer(context.Context, string, string, string, bool) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	return nil
}

// RemoveServer records id (Removed) on a leader.
func (n *Node) RemoveServer(_ context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	n.removed.Store(&id)
	return nil
}

// SaveBackup writes a backup of the replica's keyspace, as a Node's.
func (n *Node) SaveBackup(ctx context.Context, w io.Writer) (cluster.BackupHeader, error) {
	if !n.IsLeader() {
		return cluster.BackupHeader{}, n.notLeader()
	}
	return cluster.WriteBackup(ctx, w, n.fsm, "mem", func(uint64) uint64 { return 0 })
}

// RestoreBackupFrom is refused: a restore is Raft's (raft.Restore), and
// a MemNode has none. Tests restore through a real Node.
func (n *Node) RestoreBackupFrom(context.Context, io.Reader) (cluster.BackupHeader, uint64, error) {
	return cluster.BackupHeader{}, 0, fmt.Errorf("restore on a MemNode: %w", errors.ErrUnsupported)
}

// Leave is refused: a MemNode is one replica with no cluster to leave.
func (n *Node) Leave(context.Context) error { return cluster.ErrLastVoter }

// Latch applies a SetFeatureLevel entry, as a cluster's leader does once
// every server announced the level: the FSM then writes what the level
// adds (LevelAttempts' attempt history, for one).
func (n *Node) Latch(ctx context.Context, level uint32) error {
	res, err := n.Apply(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: level}}})
	if err == nil {
		err = pb.ResultError(res)
	}
	return err
}

// ClusterID is the id the FSM holds: a MemNode proposes none itself.
func (n *Node) ClusterID() string { return n.fsm.ClusterID() }

// CheckPeerCluster refuses a call that named another cluster than the one
// the FSM holds.
func (n *Node) CheckPeerCluster(peer, theirs string) error {
	return n.ident.Check("grpc", peer, theirs)
}

// Service is the node's Service, the production write and read paths.
func (n *Node) Service() *service.Service { return n.svc }

// Identity is the cluster identity check of the FSM's id.
func (n *Node) Identity() *peer.Identity { return n.ident }
