package fsm

import (
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Benchmarks apply pre-encoded entries (encoding is the leader's cost) to
// an FSM on the real disk, with 128-byte payloads. Run them with
//
//	go test ./fsm -run '^$' -bench . -benchmem -benchtime 2s

// benchLog numbers entries for one FSM.
type benchLog struct {
	f     *FSM
	index uint64
}

// levelFlag latches the backlog, drain, open and bytes-written benchmarks
// at another feature level (0: the build's), to compare levels by turns:
// -fsm.level=16 stores the pending index that level 17 keeps in memory.
var levelFlag = flag.Uint("fsm.level", 0, "benchmarks: the feature level the backlog, drain, open and bytes-written benchmarks latch (0: the build's)")

// benchLevel is the level levelFlag names.
func benchLevel() uint32 {
	if *levelFlag == 0 {
		return FeatureLevel
	}
	return uint32(*levelFlag)
}

func newBenchLog(b testing.TB) *benchLog {
	f, err := Open(b.TempDir(), Options{CheckpointEntries: *benchWindow})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	return &benchLog{f: f}
}

// benchWindow is the checkpoint window of the benchmarks' FSMs
// (Options.CheckpointEntries), so one benchmark measures both ways.
var benchWindow = flag.Int("fsm.window", 0, "checkpoint window of the benchmarks' FSMs, in entries (0: every segment)")

// newCurrentBenchLog is newBenchLog latched at benchLevel(): the data
// path a cluster of this build runs. An FSM that is never latched applies
// level 0's rules, which write every index key that later levels keep in
// memory alone.
func newCurrentBenchLog(b testing.TB) *benchLog {
	l := newBenchLog(b)
	l.f.Apply(l.entry(b, latchCmd(benchLevel())))
	return l
}

func (l *benchLog) entry(b testing.TB, cmd *pb.Command) *raft.Log {
	l.index++
	return entry(b, l.index, cmd)
}

// backlog enqueues n tasks of queue q in entries of up to 1000 tasks.
func (l *benchLog) backlog(b testing.TB, q string, n int) {
	for n > 0 {
		k := min(n, pb.MaxBatch)
		tasks := make([]*pb.NewTask, k)
		for i := range tasks {
			tasks[i] = nt(q, "t", 0)
		}
		if res := l.f.Apply(l.entry(b, enqueueCmd(at(0), tasks...))).(*pb.CommandResult); len(res.GetItems()) != k {
			b.Fatalf("backlog enqueue: %v", res.GetErrorDetail())
		}
		n -= k
	}
}

// BenchmarkApplyBatch_Enqueue: one task per entry, each with its own
// idempotency key (clients always send one), batch entries per ApplyBatch.
func BenchmarkApplyBatch_Enqueue(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			l := newCurrentBenchLog(b)
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				task := nt("bench", "t", uint32(i%10))
				task.IdempotencyKey = fmt.Sprintf("req-%012d", i)
				logs[i] = l.entry(b, enqueueCmd(at(time.Duration(i)), task))
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < len(logs); i += batch {
				l.f.ApplyBatch(logs[i:min(i+batch, len(logs))])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkApplyBatch_ClaimSubmit: batch claims of one task each in one
// ApplyBatch, then their batch submits in the next. One op is one
// claim+submit pair. The submits are encoded inside the timed loop (they
// need the claimed ids), as a worker's answers would be.
func BenchmarkApplyBatch_ClaimSubmit(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			l := newCurrentBenchLog(b)
			l.backlog(b, "bench", b.N)
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 1))
			claims := make([]*raft.Log, batch)
			submits := make([]*raft.Log, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for done := 0; done < b.N; {
				n := min(batch, b.N-done)
				for i := range claims[:n] {
					l.index++
					claims[i] = &raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim}
				}
				submits = submits[:0]
				for _, out := range l.f.ApplyBatch(claims[:n]) {
					task := out.(*pb.CommandResult).GetTasks()[0]
					submits = append(submits, l.entry(b, completeCmd(at(time.Second), task.GetId(), task.GetFence())))
				}
				for _, out := range l.f.ApplyBatch(submits) {
					if c := out.(*pb.CommandResult).GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
						b.Fatalf("submit: %v", c)
					}
				}
				done += n
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is this process's user and system CPU time: apply's and
// Pebble's background work together. Per op it is steadier than wall
// time on a machine that other work shares.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApplyBatch_ClaimHeartbeatSubmit_Level: a claim, a heartbeat and
// a submit per task, 64 entries per ApplyBatch, with the cluster latched at
// LevelCounters (no attempt history) or LevelAttempts (each claim appends
// an attempt that the heartbeat renews and the submit ends): the cost of
// the history on the hot path. One op is one task's three commands.
func BenchmarkApplyBatch_ClaimHeartbeatSubmit_Level(b *testing.B) {
	const batch = 64
	for _, level := range []uint32{LevelCounters, LevelAttempts, LevelSplitRecords} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			l := newBenchLog(b)
			l.f.Apply(l.entry(b, latchCmd(level)))
			l.backlog(b, "bench", b.N)
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 1))
			claims := make([]*raft.Log, batch)
			next := make([]*raft.Log, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(batch, b.N-done)
				for i := range claims[:n] {
					l.index++
					claims[i] = &raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim}
				}
				var tasks []*pb.Task
				for _, out := range l.f.ApplyBatch(claims[:n]) {
					tasks = append(tasks, out.(*pb.CommandResult).GetTasks()[0])
				}
				next = next[:0]
				for _, t := range tasks {
					next = append(next, l.entry(b, heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: t.GetId(), Fence: t.GetFence()})))
				}
				l.f.ApplyBatch(next)
				next = next[:0]
				for _, t := range tasks {
					next = append(next, l.entry(b, completeCmd(at(3*time.Second), t.GetId(), t.GetFence())))
				}
				for _, out := range l.f.ApplyBatch(next) {
					if c := out.(*pb.CommandResult).GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
						b.Fatalf("submit: %v", c)
					}
				}
				done += n
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkClaim_Backlog: the latency of one claim (its own entry and
// apply batch) from a backlog of pending tasks. The backlog is built once
// per size in entries of 1000 tasks and topped up, off the clock, every
// 500 claims (counted across the framework's runs, so that the backlog
// stays within 500 of its size); the claimed tasks stay running. Claims leave tombstones at
// the head of the pending range: the head hint in the catalog lets a
// claim seek past them, which keeps the cost flat.
func BenchmarkClaim_Backlog(b *testing.B) {
	parent := b // owns the backlogs: a sub-benchmark's cleanups run after each of its runs
	for _, pending := range []int{1000, 1000000} {
		var l *benchLog
		owed := 0 // claims not yet replaced, carried across the framework's runs
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			if pending > 1000 && testing.Short() {
				b.Skip("building the 1M backlog takes seconds; skipped under -short")
			}
			if l == nil { // built once, reused as the framework grows b.N
				l = newCurrentBenchLog(parent)
				l.backlog(b, "bench", pending)
			}
			const topUp = 500
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 1))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.index++
				out := l.f.Apply(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim})
				if len(out.(*pb.CommandResult).GetTasks()) != 1 {
					b.Fatal("claim found nothing")
				}
				if owed++; owed == topUp {
					b.StopTimer()
					l.backlog(b, "bench", topUp)
					owed = 0
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkApplyBatch_EnqueueKeyed: enqueues with random 32-hex-digit
// idempotency keys, as the Go client mints them, against a keyspace that
// already holds 250,000 such tasks. keys=new is what every replica pays
// for production traffic: each lookup misses. keys=seen re-sends keys that
// exist and is answered DUPLICATE. The keyspace is built once, off the
// clock, and every run starts from a Pebble checkpoint of it, so runs of
// any length see the same keyspace.
func BenchmarkApplyBatch_EnqueueKeyed(b *testing.B) {
	const existing = 250_000
	var tmpl *keyedTemplate
	parent := b // owns the template: a sub-benchmark's cleanups run after each of its runs
	for _, c := range []struct {
		keys  string
		batch int
	}{{"new", 1}, {"new", 64}, {"seen", 64}} {
		b.Run(fmt.Sprintf("existing=%d/keys=%s/batch=%d", existing, c.keys, c.batch), func(b *testing.B) {
			if testing.Short() {
				b.Skip("building the 250k keyspace takes seconds; skipped under -short")
			}
			if tmpl == nil {
				tmpl = newKeyedTemplate(parent, existing)
			}
			l := tmpl.clone(b)
			rng := rand.New(rand.NewPCG(uint64(b.N), 7))
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				task := nt("bench", "t", uint32(i%10))
				if c.keys == "new" {
					task.IdempotencyKey = randomKey(rng)
				} else {
					task.IdempotencyKey = tmpl.keys[rng.IntN(len(tmpl.keys))]
				}
				logs[i] = l.entry(b, enqueueCmd(at(time.Duration(i)), task))
			}
			want := pb.Code_CODE_OK
			if c.keys == "seen" {
				want = pb.Code_CODE_DUPLICATE
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < len(logs); i += c.batch {
				for _, out := range l.f.ApplyBatch(logs[i:min(i+c.batch, len(logs))]) {
					if got := out.(*pb.CommandResult).GetItems()[0].GetCode(); got != want {
						b.Fatalf("enqueue: %v, want %v", got, want)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// keyedTemplate is an FSM holding tasks with random idempotency keys, and
// those keys.
type keyedTemplate struct {
	l    *benchLog
	keys []string
}

func newKeyedTemplate(b testing.TB, n int) *keyedTemplate {
	t := &keyedTemplate{l: newCurrentBenchLog(b), keys: make([]string, 0, n)}
	rng := rand.New(rand.NewPCG(1, 1))
	for len(t.keys) < n {
		tasks := make([]*pb.NewTask, min(n-len(t.keys), pb.MaxBatch))
		for i := range tasks {
			tasks[i] = nt("bench", "t", uint32(i%10))
			tasks[i].IdempotencyKey = randomKey(rng)
			t.keys = append(t.keys, tasks[i].IdempotencyKey)
		}
		res := t.l.f.Apply(t.l.entry(b, enqueueCmd(at(0), tasks...))).(*pb.CommandResult)
		if len(res.GetItems()) != len(tasks) {
			b.Fatalf("template enqueue: %v", res.GetErrorDetail())
		}
	}
	return t
}

// clone opens a copy of the template's keyspace, continuing its log.
func (t *keyedTemplate) clone(b testing.TB) *benchLog {
	dir := b.TempDir()
	if err := t.l.f.db.Checkpoint(filepath.Join(dir, dbDir)); err != nil {
		b.Fatal(err)
	}
	f, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	return &benchLog{f: f, index: t.l.index}
}

func randomKey(rng *rand.Rand) string {
	var k [16]byte
	for i := range k {
		k[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(k[:])
}

// BenchmarkIdemIndex_Build: the scan of the task records that Open and
// Restore pay to build the ready order and the idempotency index, over a
// keyspace of 1M pending tasks with random keys. One op is one build; it
// reports the heap the built order and index hold per task.
func BenchmarkIdemIndex_Build(b *testing.B) {
	if testing.Short() {
		b.Skip("building the 1M keyspace takes seconds; skipped under -short")
	}
	const keys = 1_000_000
	tmpl := newKeyedTemplate(b, keys)
	b.ReportAllocs()
	b.ResetTimer()
	var o *readyOrder
	var heap uint64
	for range b.N {
		o = nil
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		o = newReadyOrder()
		if err := o.rebuild(storage.Wrap(tmpl.l.f.db)); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
	}
	if o.idem.len() != keys {
		b.Fatalf("built over %d keys, want %d", o.idem.len(), keys)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/key")
	b.ReportMetric(float64(heap)/keys, "heap-B/key")
}

// BenchmarkCheckHash: the consistency check's hash of a 200,000-task
// backlog (128-byte payloads), as one voter reads it; MB/s is keys and
// values hashed a second of one core. cluster's CheckRate paces this
// read, so its cost per MiB says what a rate costs in CPU.
func BenchmarkCheckHash(b *testing.B) {
	l := newCurrentBenchLog(b)
	l.backlog(b, "bench", 200_000)
	views := make(chan *CheckView, 1)
	l.f.SetCheckObserver(func(ev CheckEvent) {
		if ev.View != nil {
			views <- ev.View
		}
	})
	l.index++
	l.f.Apply(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: mustEncode(b, checkEntryCmd(at(time.Hour)))})
	v := <-views
	b.Cleanup(v.Release)
	var read int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.HashChunked(func(n int64) error { read = n; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(read)
}

// BenchmarkIdemIndex_NewKey: an enqueue's look-up of a new key and its set,
// in an index that already holds a million keys (a day of keyed enqueues
// at retention's default holds more): the map no cache holds, where each
// probe of an absent hash goes to memory.
func BenchmarkIdemIndex_NewKey(b *testing.B) {
	const held = 1_000_000
	x := newIdemIndex()
	owns := func(uint64, []byte) (bool, error) { return false, nil }
	key := func(i int) []byte { return storage.IdemKey("q", "t", fmt.Sprintf("req-%012d", i)) }
	for i := range held {
		if err := x.set(key(i), uint64(i+1), owns); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([][]byte, b.N)
	for i := range keys {
		keys[i] = key(held + i)
	}
	b.ResetTimer()
	for i, ik := range keys {
		if _, ok, err := x.lookup(ik, owns); err != nil || ok {
			b.Fatalf("lookup of a new key: %v, %v", ok, err)
		}
		if err := x.set(ik, uint64(held+i+1), owns); err != nil {
			b.Fatal(err)
		}
	}
}
