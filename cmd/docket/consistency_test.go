package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// checkTune runs consistency checks often and makes Pebble flush (and
// write MANIFEST edits) after a few KiB, so a test can damage a MANIFEST
// that matters.
func checkTune(c *cluster.Config) {
	c.CheckInterval = 300 * time.Millisecond
	c.CheckTimeout = 2 * time.Second
	c.PebbleMemTableBytes = 64 << 10
}

// pebbleDir is where a node's FSM keeps its Pebble database.
func (n *sysNode) pebbleDir() string { return filepath.Join(n.dir, "fsm", "db") }

// enqueueMany enqueues count tasks of about 1 KiB and returns their ids.
func enqueueMany(t *testing.T, nodes []*sysNode, queue string, count int) []string {
	t.Helper()
	c := mustClient(t, addrsOf(nodes)...)
	ctx := ctxT(t, 60*time.Second)
	var ids []string
	for len(ids) < count {
		var tasks []*pb.NewTask
		for i := 0; i < 20 && len(ids)+len(tasks) < count; i++ {
			tasks = append(tasks, &pb.NewTask{Queue: queue, Payload: []byte(fmt.Sprintf("%04d-%s", len(ids)+i, strings.Repeat("x", 1000)))})
		}
		res, err := c.Enqueue(ctx, tasks...)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		for _, it := range res {
			if it.GetCode() != pb.Code_CODE_OK {
				t.Fatalf("enqueue: %v", it)
			}
			ids = append(ids, it.GetTaskId())
		}
	}
	return ids
}

// currentManifest is the MANIFEST file Pebble's marker names.
func currentManifest(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), "marker.manifest."); ok {
			if i := strings.Index(name, "MANIFEST-"); i >= 0 {
				return filepath.Join(dir, name[i:])
			}
		}
	}
	t.Fatalf("no manifest marker in %s", dir)
	return ""
}

// flipManifest flips 16 bytes inside the second record of the current
// MANIFEST, as the reproduction did: Pebble stops replaying the
// MANIFEST at the damaged record and opens without error, having forgotten
// every sstable that later records added.
func flipManifest(t *testing.T, dir string) {
	t.Helper()
	path := currentManifest(t, dir)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rr := record.NewReader(f, 0)
	var offsets []int64
	for {
		off := rr.Offset()
		r, err := rr.Next()
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			break
		}
		offsets = append(offsets, off)
	}
	_ = f.Close() // read-only
	if len(offsets) < 3 {
		t.Fatalf("%s has %d records; the workload did not make Pebble flush", path, len(offsets))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := offsets[1] + 7 // past the record header: checksum, length, type
	for i := at; i < at+16 && i < int64(len(b)); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped 16 bytes at offset %d of %s (%d records)", at, filepath.Base(path), len(offsets))
}

// healthOf is a node's overall gRPC health.
func healthOf(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return res.GetStatus()
}

// waitDiverged waits until n says NOT_SERVING with its Raft shut down and
// its status explaining the divergence.
func waitDiverged(t *testing.T, n *sysNode) {
	t.Helper()
	testwait.For(t, 30*time.Second, n.id+" to be caught diverged", func() bool {
		return errors.Is(n.node.CheckErr(), check.ErrDiverged) && n.node.Status().GetState() == "Shutdown"
	})
	testwait.For(t, 5*time.Second, n.id+" health NOT_SERVING", func() bool {
		return healthOf(t, n.grpcAddr) == healthpb.HealthCheckResponse_NOT_SERVING
	})
	cs := n.node.Status().GetConsistency()
	if cs.GetStatus() != "diverged" || cs.GetOwnHash() == "" || cs.GetOwnHash() == cs.GetMajorityHash() {
		t.Fatalf("%s consistency status %v, want diverged with differing hashes", n.id, cs)
	}
	_, err := rawQueue(t, n.grpcAddr).GetTask(ctxT(t, 5*time.Second), &pb.GetTaskRequest{TaskId: "x", AllowStale: true})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("%s read: %v, want Unavailable", n.id, err)
	}
}

// mustHaveAll checks that every task is readable through the cluster and
// in the local replicas of healthy.
func mustHaveAll(t *testing.T, healthy []*sysNode, ids []string) {
	t.Helper()
	c := mustClient(t, addrsOf(healthy)...)
	ctx := ctxT(t, 30*time.Second)
	for _, id := range ids {
		if _, err := c.ReadTask(ctx, id); err != nil {
			t.Fatalf("acknowledged task %s through the cluster: %v", id, err)
		}
		for _, n := range healthy {
			// A follower may not have applied the newest tasks yet.
			testwait.For(t, 5*time.Second, "task "+id+" on "+n.id, func() bool {
				_, err := n.node.FSM().GetTask(id)
				return err == nil
			})
		}
	}
}

// A follower's MANIFEST damaged while it is stopped. Pebble reads a
// MANIFEST up to the damage, so the follower opens an earlier flushed
// state of its keyspace, the applied index of that state with it: Pebble
// keeps no WAL whose newer batches could claim an index the tables no
// longer hold. It lacks acknowledged tasks at first, replays them from
// the Raft log, and agrees with the majority again. While Pebble had a
// WAL, the follower opened with its newest applied index and lost tables:
// a silent divergence that only the consistency check caught (the checks
// of a keyspace altered outside the log still do: writeStray below).
func Test_CorruptManifestFollowerReplaysTheLog(t *testing.T) {
	nodes := startCluster(t, 3, checkTune)
	ids := enqueueMany(t, nodes, "manifest", 400)
	waitConverged(t, nodes)
	leader := waitLeader(t, nodes)
	bad := followers(nodes, leader)[0]
	bad.stop()
	flipManifest(t, bad.pebbleDir())
	bad.start(nil)

	lost := 0
	for _, id := range ids {
		if _, err := bad.node.FSM().GetTask(id); errors.Is(err, pb.ErrNotFound) {
			lost++
		}
	}
	t.Logf("the damaged follower opened without error and lacked %d of %d acknowledged tasks", lost, len(ids))
	if lost == 0 {
		t.Fatal("the damaged MANIFEST lost nothing: the reproduction did not reproduce")
	}
	mustHaveAll(t, nodes, ids)
	waitConverged(t, nodes)
	// A check passes on it, and it serves.
	testwait.For(t, 30*time.Second, bad.id+" to pass a consistency check", func() bool {
		cs := bad.node.Status().GetConsistency()
		return bad.node.CheckErr() == nil && cs.GetOwnHash() != "" && cs.GetOwnHash() == cs.GetMajorityHash()
	})
	testwait.For(t, 10*time.Second, bad.id+" health SERVING", func() bool {
		return healthOf(t, bad.grpcAddr) == healthpb.HealthCheckResponse_SERVING
	})
}

// writeStray puts a key the log never wrote into a stopped node's Pebble:
// a finished task's record that decodes, with an id a node could have
// given, so that only the consistency check can tell (a record that does
// not decode, or whose id no node gives, is refused at start). Its
// retention ends far past the test, so no purge takes it.
func writeStray(t *testing.T, n *sysNode) {
	t.Helper()
	db, err := pebble.Open(n.pebbleDir(), &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatal(err)
	}
	id := fsm.TaskID(1<<40, 0)
	stray, err := proto.Marshal(&pb.Task{Id: id, Queue: "stray", Tenant: "default", State: pb.TaskState_TASK_STATE_COMPLETED,
		Payload: []byte("not from the log"), ExpireAt: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("t/"+id), stray, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A node whose keyspace holds a key the log never wrote is caught by the
// next check, and a restarted node is NOT_SERVING until a check passes on
// it.
func Test_AlteredKeyspaceCaughtByNextCheck(t *testing.T) {
	nodes := startCluster(t, 3, checkTune)
	ids := enqueueMany(t, nodes, "stray", 20)
	waitConverged(t, nodes)
	leader := waitLeader(t, nodes)
	fs := followers(nodes, leader)
	good, bad := fs[0], fs[1]

	// A clean restart: NOT_SERVING at first, SERVING once a check passed.
	good.stop()
	good.start(nil)
	if err := good.node.CheckErr(); !errors.Is(err, check.ErrAwaitingCheck) {
		t.Fatalf("restarted %s: CheckErr %v, want ErrAwaitingCheck", good.id, err)
	}
	testwait.For(t, 20*time.Second, good.id+" to pass a check and serve", func() bool {
		return good.node.CheckErr() == nil && healthOf(t, good.grpcAddr) == healthpb.HealthCheckResponse_SERVING
	})

	bad.stop()
	writeStray(t, bad)
	bad.start(nil)
	if healthOf(t, bad.grpcAddr) == healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("%s is SERVING before any check passed on it", bad.id)
	}
	waitDiverged(t, bad)
	mustHaveAll(t, []*sysNode{leader, good}, ids)
}

// A leader whose own keyspace is the odd one out hands leadership over and
// then stops; while too few voters agree, nothing is recorded and nobody
// stops.
func Test_DivergedLeaderTransfersThenStops(t *testing.T) {
	nodes := startCluster(t, 3, checkTune)
	ids := enqueueMany(t, nodes, "leader", 20)
	waitConverged(t, nodes)
	for _, n := range nodes {
		n.stop()
	}
	bad, other, last := nodes[0], nodes[1], nodes[2]
	writeStray(t, bad)
	logs := &logBuffer{}
	bad.tune = func(c *cluster.Config) {
		checkTune(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	bad.start(nil)
	other.start(nil)
	// Two voters of three that disagree: no majority, no verdict.
	waitLeader(t, []*sysNode{bad, other})
	ctx := ctxT(t, 20*time.Second)
	if !bad.node.IsLeader() {
		if _, err := other.node.TransferLeadership(ctx, bad.id); err != nil {
			t.Fatalf("transfer to %s: %v", bad.id, err)
		}
	}
	testwait.For(t, 10*time.Second, bad.id+" to lead", bad.node.IsLeader)
	testwait.For(t, 20*time.Second, bad.id+" to finish a check without a majority", func() bool {
		return logs.has("consistency check: voters disagree") || logs.has("too few voters reported a hash")
	})
	for _, n := range []*sysNode{bad, other} {
		if errors.Is(n.node.CheckErr(), check.ErrDiverged) {
			t.Fatalf("%s diverged without a majority verdict", n.id)
		}
	}
	// The third voter returns: two agree, and the leader is the odd one.
	last.start(nil)
	waitDiverged(t, bad)
	if !logs.has("diverged leader: leadership transferred") {
		t.Fatalf("%s did not hand leadership over before it stopped:\n%s", bad.id, logs.String())
	}
	testwait.For(t, 10*time.Second, "a healthy leader", func() bool { return other.node.IsLeader() || last.node.IsLeader() })
	mustHaveAll(t, []*sysNode{other, last}, ids)
}

// logBuffer collects a node's log for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) has(s string) bool { return strings.Contains(l.String(), s) }

// With the default one-minute interval a restarted follower does not wait
// a minute: the leader sees it awaiting a check in its discovery poll and
// runs one soon.
func Test_RestartedFollowerAsksForACheck(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	enqueueMany(t, nodes, "poke", 5)
	waitConverged(t, nodes)
	f := followers(nodes, waitLeader(t, nodes))[0]
	f.stop()
	f.start(nil)
	start := time.Now()
	testwait.For(t, 20*time.Second, f.id+" to pass a check", func() bool { return f.node.CheckErr() == nil })
	t.Logf("restarted follower serving after %v", time.Since(start).Round(time.Millisecond))
}
