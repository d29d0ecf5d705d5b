package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkEnqueueHopsCeiling is BenchmarkEnqueueHops's raft part alone,
// as `docket bench`'s ceiling runs it: three cluster.BareRafts (a node's
// raft settings, log store, LogCache and TCP transport) over a no-op FSM
// in this process, the caller applying an entry the size of one 128 B
// Enqueue on the leader, one at a time. Its hops are the ladder's raft
// rows, so the two tables say which of them Docket's own work slows:
//
//	go test ./cmd/docket/server -run '^$' -bench EnqueueHopsCeiling -benchtime 2000x
//
// fsm=spin-25us gives every replica's FSM 25 µs of CPU an entry, about
// what Docket's apply of one enqueue costs (the ladder's "FSM apply"), to
// show what a real FSM on the followers does to the raft hops on a
// machine of few cores.
func BenchmarkEnqueueHopsCeiling(b *testing.B) {
	b.Run("fsm=none", func(b *testing.B) { ceilingHops(b, noopFSM{}) })
	b.Run("fsm=spin-25us", func(b *testing.B) { ceilingHops(b, spinFSM{25 * time.Microsecond}) })
}

func ceilingHops(b *testing.B, f raft.FSM) {
	tp := &tape{}
	if err := installRaftSink(tp); err != nil {
		b.Fatal(err)
	}
	base := b.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	var rafts []*cluster.BareRaft
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		cfg := cluster.DefaultConfig()
		cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.Logger = fmt.Sprintf("c%d", i), filepath.Join(base, fmt.Sprintf("c%d", i)), "127.0.0.1:0", quiet
		id := cfg.ID
		cfg.WrapLogStore = func(s raft.LogStore) raft.LogStore { return &timedLogs{LogStore: s, node: id, t: tp} }
		r, err := cluster.NewBareRaft(cfg, f)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close() }) // teardown after the measurement
		rafts = append(rafts, r)
		servers = append(servers, raft.Server{ID: raft.ServerID(cfg.ID), Address: r.Addr})
	}
	if err := rafts[0].Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		b.Fatal(err)
	}
	var leader *raft.Raft
	var leaderID string
	testwait.For(b, 20*time.Second, "a ceiling leader", func() bool {
		for i, r := range rafts {
			if r.Raft.State() == raft.Leader {
				leader, leaderID = r.Raft, string(servers[i].ID)
				return true
			}
		}
		return false
	})
	body := make([]byte, 128)
	data, err := fsm.EncodeCommand(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Now: time.Now().UnixNano(),
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{{Queue: "hops", Payload: body,
			IdempotencyKey: fmt.Sprintf("%032x", 1), Tenant: pb.DefaultTenant}}}}})
	if err != nil {
		b.Fatal(err)
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if err := leader.Apply(data, 10*time.Second).Error(); err != nil {
			b.Fatal(err)
		}
	}
	tp.take()
	var calls []callMarks
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := leader.Apply(data, 10*time.Second).Error()
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		calls = append(calls, callMarks{start: t0, end: t1, marks: tp.take()})
	}
	b.StopTimer()
	names := slices.Concat([]string{"Apply → raft dispatch (applyCh)"}, raftHops, []string{"applied → Apply returns (future)"})
	lad, skipped := ladder(calls, names, func(c callMarks) ([]time.Time, string) {
		rp, why := raftPoints(c, leaderID, c.start, c.end)
		if why != "" {
			return nil, why
		}
		return slices.Concat([]time.Time{c.start}, rp, []time.Time{c.end}), ""
	})
	if b.N >= 100 {
		printLadder(os.Stdout, "Raft ceiling entry at c=1", names, lad, skipped)
	}
}

// noopFSM applies nothing, as docket bench's ceiling: what is left is the
// Raft log's own cost.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) any                 { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnap{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnap struct{}

func (noopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (noopSnap) Release()                          {}

// spinFSM is noopFSM that spends d of CPU on each entry.
type spinFSM struct{ d time.Duration }

func (s spinFSM) Apply(*raft.Log) any {
	for start := time.Now(); time.Since(start) < s.d; {
	}
	return nil
}
func (spinFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnap{}, nil }
func (spinFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }
