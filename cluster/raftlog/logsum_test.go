package raftlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// An entry damaged on the leader's disk, after it left the leader's log
// cache, must not reach a follower that catches up from that disk: the
// leader refuses to read it, reports the fault and gives up leading, and
// the follower gets the good copy from the next leader.
func Test_LogSum_CorruptEntryOnLeaderIsNotReplicated(t *testing.T) {
	var nodes []*cluster.Node
	for i := 1; i <= 3; i++ {
		c := boltConfig(t, fmt.Sprintf("n%d", i), 0)
		if i == 1 {
			c.BootstrapExpect = 1
		}
		c.LogCacheSize = 1 // the damaged entry must be read from disk
		n := nodetest.Start(t, c)
		if i == 1 {
			testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := nodes[0].AddServer(ctx, n.ID(), n.Internals().Config.RaftAddr, "", false); err != nil {
				cancel()
				t.Fatal(err)
			}
			cancel()
		}
		nodes = append(nodes, n)
	}
	l, lag := nodes[0], nodes[2]
	lagCfg := lag.Internals().Config
	if err := lag.Crash(); err != nil {
		t.Fatal(err)
	}
	payload := "logsum-payload-" + fmt.Sprint(rand.Uint64())
	id := nodetest.ProposeOK(t, l, payload)
	for i := 0; i < 4; i++ { // push the entry out of the leader's log cache
		nodetest.ProposeOK(t, l, "filler")
	}
	nodetest.FlipInFile(t, filepath.Join(l.Internals().Config.DataDir, "raft.db"), []byte(payload), 0, []byte{0x20})

	lag = nodetest.Start(t, lagCfg)
	testwait.For(t, 15*time.Second, "the lagging follower to apply the entry", func() bool {
		_, err := lag.FSM().GetTask(id)
		return err == nil
	})
	task, err := lag.FSM().GetTask(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(task.GetPayload()); got != payload {
		t.Fatalf("lagging follower applied a damaged entry: payload %q, want %q", got, payload)
	}
	fault := l.LogFault()
	if !errors.Is(fault, raftlog.ErrRaftStoreCorrupt) || !strings.Contains(fault.Error(), "raft.db") {
		t.Fatalf("leader's LogFault = %v, want raftlog.ErrRaftStoreCorrupt naming raft.db", fault)
	}
	if l.IsLeader() {
		t.Fatal("the node with the damaged entry still leads")
	}
	if ps := l.HealthProblems(); len(ps) == 0 || !strings.Contains(strings.Join(ps, "; "), "raft log damaged") {
		t.Fatalf("leader's HealthProblems = %q, want the damaged log among them", ps)
	}
}

// A damaged entry in a stopped node's raft.db is found when it starts: New
// refuses with an error naming the file and the entry.
func Test_LogSum_CorruptEntryRefusedAtStart(t *testing.T) {
	cfg := boltConfig(t, "n1", 1)
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	payload := "logsum-boot-" + fmt.Sprint(rand.Uint64())
	nodetest.ProposeOK(t, n, payload)
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, "raft.db")
	nodetest.FlipInFile(t, path, []byte(payload), 3, []byte{0x01})
	cfg.RaftAddr = n.Internals().Config.RaftAddr
	n2, err := cluster.New(cfg)
	if err == nil {
		_ = n2.Shutdown(context.Background())
		t.Fatal("New started a node whose raft.db holds a damaged entry")
	}
	if !errors.Is(err, raftlog.ErrRaftStoreCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("New: %v, want raftlog.ErrRaftStoreCorrupt naming %s", err, path)
	}
}

// Damage to the stable store's term or vote makes New refuse, naming the
// file: a node that forgot its term or vote could vote twice in a term.
func Test_LogSum_StableStoreDamageRefusedAtStart(t *testing.T) {
	for _, key := range []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"} {
		t.Run(key, func(t *testing.T) {
			cfg := boltConfig(t, "n1", 1)
			n := nodetest.Start(t, cfg)
			testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
			nodetest.ProposeOK(t, n, "x")
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(cfg.DataDir, "raft.db")
			// The value follows its key in a bolt leaf; the term's high
			// byte and the candidate's first byte both change the value.
			nodetest.FlipInFile(t, path, []byte(key), len(key), []byte{0x01})
			cfg.RaftAddr = n.Internals().Config.RaftAddr
			n2, err := cluster.New(cfg)
			if err == nil {
				_ = n2.Shutdown(context.Background())
				t.Fatalf("New started with a damaged %s", key)
			}
			if !errors.Is(err, raftlog.ErrRaftStoreCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("New: %v, want raftlog.ErrRaftStoreCorrupt naming %s", err, path)
			}
		})
	}
}

// storeImage is everything a raft.db answers: the log and the stable values.
type storeImage struct {
	first, last uint64
	logs        map[uint64]raft.Log
	stable      map[string]string
}

var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// readStore opens path as a node does and reads it whole. Per entry and
// per stable key it records either the value or that reading failed. A
// panic or memory fault in BoltDB counts as a failure at open.
func readStore(path string) (img storeImage, readErrs int, openErr error) {
	defer func() {
		if r := recover(); r != nil {
			openErr = fmt.Errorf("panic: %v", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	s, err := raftlog.OpenBolt(path, slog.New(slog.DiscardHandler))
	if err != nil {
		return img, 0, err
	}
	defer s.Close()
	if err := s.VerifyLog(0); err != nil {
		return img, 0, err
	}
	img.logs, img.stable = map[uint64]raft.Log{}, map[string]string{}
	if img.first, err = s.FirstIndex(); err != nil {
		return img, 0, err
	}
	if img.last, err = s.LastIndex(); err != nil {
		return img, 0, err
	}
	for i := img.first; i <= img.last && i < img.first+100000; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			readErrs++
			continue
		}
		img.logs[i] = l
	}
	for _, k := range stableKeys {
		v, err := s.Get([]byte(k))
		if err != nil && err.Error() != "not found" {
			readErrs++
			continue
		}
		img.stable[k] = string(v)
	}
	return img, readErrs, nil
}

func sameLog(a, b raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

// 40 random 8-byte flips over the written bytes of a raft.db copy: each is
// found at open or read, or it changed nothing that is read back.
func Test_LogSum_RandomFlipsAreDetectedOrHarmless(t *testing.T) {
	cfg := boltConfig(t, "n1", 1)
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	for i := 0; i < 120; i++ {
		nodetest.ProposeOK(t, n, strings.Repeat(fmt.Sprintf("task %d ", i), 1+i%40))
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	pristine, err := os.ReadFile(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	truth, errs, err := readStore(copyTo(t, dir, "truth.db", pristine))
	if err != nil || errs != 0 {
		t.Fatalf("pristine copy: %v, %d read errors", err, errs)
	}
	var written []int // flips land on written bytes: zeroes are mostly never-used space
	for i, b := range pristine {
		if b != 0 && i+8 <= len(pristine) {
			written = append(written, i)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DOCKET_TEST_SEED"); v != "" { // to replay a logged seed
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d, raft.db %d bytes, %d written, %d entries", seed, len(pristine), len(written), len(truth.logs))
	var atOpen, atRead, harmless, rolledBack, vanished int
	rounds := raftlog.FlipRounds(40)
	for k := 0; k < rounds; k++ {
		img := bytes.Clone(pristine)
		off := written[rng.IntN(len(written))]
		for j := 0; j < 8; j++ {
			img[off+j] ^= byte(1 + rng.IntN(255))
		}
		got, readErrs, openErr := readStoreBounded(t, copyTo(t, dir, fmt.Sprintf("flip%d.db", k), img))
		switch {
		case openErr != nil:
			if os.Getenv("DOCKET_LOGSUM_DEBUG") != "" {
				t.Logf("flip %d at %d: %v", k, off, openErr)
			}
			atOpen++
			continue
		}
		for i, want := range truth.logs {
			if l, ok := got.logs[i]; ok && !sameLog(l, want) {
				t.Errorf("flip %d at offset %d: entry %d read back changed without an error", k, off, i)
			}
		}
		for i := range got.logs {
			if _, ok := truth.logs[i]; !ok {
				t.Errorf("flip %d at offset %d: entry %d appeared", k, off, i)
			}
		}
		for key, v := range got.stable {
			switch {
			case v == truth.stable[key]:
			case v == "":
				// A flip in a bbolt branch or leaf page can make a key
				// unfindable: Get says "not found", which a node cannot
				// tell from a vote it never cast. A known gap, named in
				// DESIGN.md, "Checksums"; counted, not failed.
				vanished++
				t.Logf("flip %d at offset %d: %s vanished (was %q)", k, off, key, truth.stable[key])
			default:
				t.Errorf("flip %d at offset %d: %s read back %q, was %q", k, off, key, v, truth.stable[key])
			}
		}
		if readErrs > 0 {
			atRead++
		} else {
			switch {
			case got.first == truth.first && got.last == truth.last:
				harmless++
			case off < 2*os.Getpagesize() && got.first == truth.first && got.last < truth.last:
				// A flip in one of bbolt's two meta pages at the front
				// makes it open the previous transaction: the last append
				// is lost on this node, as after a crash before its fsync
				// (DESIGN.md, "Checksums", says so). Seen with seed
				// 1795396244672149674, flip at offset 64.
				rolledBack++
			default:
				t.Errorf("flip %d at offset %d: log range %d-%d, was %d-%d", k, off, got.first, got.last, truth.first, truth.last)
			}
		}
	}
	t.Logf("%d flips: %d refused at open, %d failed on read, %d rolled back to the previous transaction, %d changed nothing read back; stable values vanished %d times",
		rounds, atOpen, atRead, rolledBack, harmless, vanished)
	if atOpen+atRead == 0 {
		t.Fatal("no flip was detected: the test hit nothing that matters")
	}
}

// readStoreBounded is readStore in a child process whose address space is
// capped at 2 GiB. bbolt trusts sizes it reads from its pages: a flip that
// lands on one can make it allocate without bound (a CI run's test binary
// grew to 24 GiB and was OOM-killed). Dying of that is a refusal at open,
// loud, not silent damage; the parent compares what the child read.
func readStoreBounded(t *testing.T, path string) (storeImage, int, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^Test_LogSumReadHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DOCKET_LOGSUM_READ="+path)
	out, err := cmd.Output()
	if err != nil {
		return storeImage{}, 0, fmt.Errorf("reading %s died: %v", path, err)
	}
	var r readResult
	if err := json.Unmarshal(lastLine(out), &r); err != nil {
		t.Fatalf("helper output of %d bytes: %v", len(out), err)
	}
	if r.OpenErr != "" {
		return storeImage{}, 0, errors.New(r.OpenErr)
	}
	img := storeImage{first: r.First, last: r.Last, logs: map[uint64]raft.Log{}, stable: r.Stable}
	for _, l := range r.Logs {
		img.logs[l.Index] = l
	}
	return img, r.ReadErrs, nil
}

type readResult struct {
	OpenErr     string
	First, Last uint64
	Logs        []raft.Log
	Stable      map[string]string
	ReadErrs    int
}

// lastLine is the helper's JSON line: the last that starts with '{' (the
// test binary prints PASS after it).
func lastLine(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(lines[i], []byte("{")) {
			return lines[i]
		}
	}
	return nil
}

// Test_LogSumReadHelper is readStoreBounded's child; it does nothing in a
// normal run.
func Test_LogSumReadHelper(t *testing.T) {
	path := os.Getenv("DOCKET_LOGSUM_READ")
	if path == "" {
		return
	}
	lim := syscall.Rlimit{Cur: 2 << 30, Max: 2 << 30}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	img, readErrs, openErr := readStore(path)
	r := readResult{First: img.first, Last: img.last, Stable: img.stable, ReadErrs: readErrs}
	if openErr != nil {
		r.OpenErr = openErr.Error()
	}
	for _, l := range img.logs {
		r.Logs = append(r.Logs, l)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n%s\n", b)
}

func copyTo(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A proposal damaged in the leader's memory after its checksum was taken
// is refused by the leader's own log store: it fails, is never stored nor
// replicated, and the cluster carries on.
func Test_LogSum_DamagedProposalNeverStored(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	data, err := fsm.EncodeCommand(nodetest.EnqueueCmd("jobs", "damaged-in-memory"))
	if err != nil {
		t.Fatal(err)
	}
	ext := fsm.CommandExtension(data, fsm.LevelBase)
	data[bytes.Index(data, []byte("damaged"))] ^= 0x20
	// Raft flattens the store's error into its text.
	if err := l.Internals().Raft.ApplyLog(raft.Log{Data: data, Extensions: ext}, 5*time.Second).Error(); err == nil || !strings.Contains(err.Error(), fsm.ErrChecksum.Error()) {
		t.Fatalf("damaged proposal: %v, want %q", err, fsm.ErrChecksum)
	}
	// The leader whose store refused the entry steps down (Raft does, on
	// a failed local append), so the next proposal goes to whichever node
	// leads once the cluster settles.
	var l2 *cluster.Node
	testwait.For(t, 10*time.Second, "a leader to take a proposal", func() bool {
		l2 = nodetest.LeaderOf(t, nodes)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := l2.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after"))
		if errors.Is(err, replica.ErrNotLeader) {
			return false
		}
		if err != nil || len(res.GetItems()) != 1 || res.GetItems()[0].GetCode() != pb.Code_CODE_OK {
			t.Fatalf("propose after the damaged one: %v, %v", res, err)
		}
		return true
	})
	last := l2.FSM().AppliedIndex()
	testwait.For(t, 5*time.Second, "every node to apply", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < last {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		if err := n.LogFault(); err != nil {
			t.Fatalf("%s: LogFault %v", n.ID(), err)
		}
		st, err := n.FSM().Stats("jobs", "default")
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].GetPending() != 1 {
			t.Fatalf("%s: stats %v, want 1 pending (only the intact proposal)", n.ID(), st)
		}
	}
}

// boltConfig is testConfig on raft.db, the store these tests damage: new
// data dirs get raft-wal (raftlog.DefaultForNew), whose damage
// walstore_test.go covers.
func boltConfig(t *testing.T, id string, expect int) cluster.Config {
	c := nodetest.Config(t, id, expect)
	c.LogStore = raftlog.LogStoreBolt
	return c
}
