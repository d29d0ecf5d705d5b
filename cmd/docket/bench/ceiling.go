package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// noopFSM applies nothing: what is left is the Raft log's own cost.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) interface{}         { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnap{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnap struct{}

func (noopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (noopSnap) Release()                          {}

// ceiling runs three in-process Raft servers with Docket's settings, stores
// and transport (cluster.NewBareRaft) over a no-op FSM, on loopback, and
// applies entries the size of an Enqueue command of batch tasks from conc
// callers. It pays the same fsyncs and TCP hops as the queue's Raft, and
// none of gRPC or the FSM, which is what it is meant to leave out.
//
// Being in one process also leaves out the cost of process boundaries,
// which a real cluster cannot avoid. On the 2-core benchmark VM, a 1-byte
// TCP round trip on loopback between idle processes took 48-112 us at p50,
// and 8-10 us between goroutines of one process. The same NewBareRaft servers
// in three processes (leader and caller in one) measured p50 1.01-1.12 ms
// at c=1 against 0.83-0.93 ms in one, in the same sitting (2026-11-22).
// A latency ratio against this ceiling therefore includes about 0.2 ms
// that no change to Docket's code can remove.
func (r *runner) ceiling(ctx context.Context, conc, batch int) (Summary, error) {
	dir, err := os.MkdirTemp("", "docket-ceiling-")
	if err != nil {
		return Summary{}, fmt.Errorf("ceiling dir: %w", err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(r.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var rafts []*cluster.BareRaft
	defer func() {
		for _, b := range rafts {
			_ = b.Close() // benchmark teardown
		}
	}()
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		cfg := cluster.DefaultConfig()
		cfg.ID = fmt.Sprintf("c%d", i)
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.RaftAddr = "127.0.0.1:0"
		cfg.Logger = quiet
		cfg.LogStore = r.cfg.LogStore
		if r.cfg.TLS {
			if cfg.TLS, err = ceilingTLS(filepath.Join(dir, "tls"), cfg.ID); err != nil {
				return Summary{}, err
			}
		}
		b, err := cluster.NewBareRaft(cfg, noopFSM{})
		if err != nil {
			return Summary{}, err
		}
		rafts = append(rafts, b)
		servers = append(servers, raft.Server{ID: raft.ServerID(cfg.ID), Address: b.Addr})
	}
	if err := rafts[0].Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		return Summary{}, fmt.Errorf("ceiling bootstrap: %w", err)
	}
	leader, err := waitBareLeader(ctx, rafts)
	if err != nil {
		return Summary{}, err
	}
	data, err := r.ceilingEntry(batch)
	if err != nil {
		return Summary{}, err
	}
	apply := func(rec *Recorder) {
		t0 := time.Now()
		if err := leader.Apply(data, opTimeout).Error(); err != nil {
			rec.Fail(err)
			return
		}
		rec.Observe(time.Since(t0), batch)
	}
	wctx, cancel := context.WithTimeout(ctx, warmup)
	scratch := NewRecorder("warmup")
	for wctx.Err() == nil {
		apply(scratch)
	}
	cancel()
	rec := NewRecorder(fmt.Sprintf("raft-ceiling c=%d", conc))
	elapsed := r.drive(ctx, "ceiling", conc, rec, func(context.Context, int) bool {
		apply(rec)
		return true
	})
	return rec.Summarize(elapsed), nil
}

// ceilingEntry is an entry the size of the workload's Enqueue command.
func (r *runner) ceilingEntry(batch int) ([]byte, error) {
	data, err := fsm.EncodeCommand(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Now: time.Now().UnixNano(),
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: r.withKeys(r.newTasks(batch, r.cfg.body()))}}})
	if err != nil {
		return nil, fmt.Errorf("ceiling entry: %w", err)
	}
	return data, nil
}

// ceilingAt is the ceiling --procs asks for: in this process, or three.
func (r *runner) ceilingAt(ctx context.Context, exe string, conc, batch int) (Summary, error) {
	if r.cfg.Procs == 3 {
		return r.ceilingProcs(ctx, exe, conc, batch)
	}
	return r.ceiling(ctx, conc, batch)
}

// withKeys gives tasks idempotency keys as the client would, so the
// ceiling's entries are the size of real Enqueue commands.
func (r *runner) withKeys(ts []*pb.NewTask) []*pb.NewTask {
	for i, t := range ts {
		t.IdempotencyKey = fmt.Sprintf("%032x", i)
		t.Tenant = pb.DefaultTenant
	}
	return ts
}

func waitBareLeader(ctx context.Context, rafts []*cluster.BareRaft) (*raft.Raft, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, b := range rafts {
			if b.Raft.State() == raft.Leader {
				return b.Raft, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("ceiling: no leader within 30s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ceilingTLS gives a ceiling server a certificate of a CA in dir, made on
// first use, so `bench --tls` compares the queue with Raft over TLS.
func ceilingTLS(dir, id string) (*certs.Reloader, error) {
	ca := filepath.Join(dir, tlsgen.CAFile)
	if _, err := os.Stat(ca); err != nil {
		if _, _, err := tlsgen.CA(dir, 1); err != nil {
			return nil, err
		}
	}
	crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: id, Server: true, Days: 1})
	if err != nil {
		return nil, err
	}
	return certs.Load(certs.Files{CA: ca, Cert: crt, Key: key}, nil)
}
