package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkEnqueue_BytesWritten: what one enqueued task costs the disk
// under Pebble, by payload size and by where large values live (inline in
// the tables, or separated into blob files), per task: bytes written to
// tables, to blob files and to everything else (MANIFEST, OPTIONS), and
// Pebble's own count of what flushes and compactions wrote. The run ends
// with a flush, so what the memtables still hold counts as flushed;
// compactions that were still owed then do not count, so a longer run
// shows more of them. Payloads are random, as compression would hide real
// ones. Entries come in apply batches of the size Raft gives a busy node
// (one 1 MiB entry fills an append).
//
//	go test ./fsm -run '^$' -bench 'Enqueue_BytesWritten/payload=128/' -benchtime 20000x
//	go test ./fsm -run '^$' -bench 'Enqueue_BytesWritten/payload=1048576/' -benchtime 2000x
func BenchmarkEnqueue_BytesWritten(b *testing.B) {
	for _, c := range []struct{ payload, batch int }{{128, 64}, {1 << 20, 1}} {
		for _, inline := range []bool{true, false} {
			b.Run(fmt.Sprintf("payload=%d/values=%s", c.payload, valuesName(inline)), func(b *testing.B) {
				w := newWrittenBench(b, c.payload, inline)
				logs := make([]*raft.Log, 0, c.batch)
				w.start(b)
				for i := range b.N {
					task := nt("bench", "t", 0)
					task.Payload = w.payload(i)
					logs = append(logs, w.l.entry(b, enqueueCmd(at(0), task)))
					if len(logs) == c.batch || i == b.N-1 {
						w.l.f.ApplyBatch(logs)
						logs = logs[:0]
					}
				}
				w.stop(b)
			})
		}
	}
}

// BenchmarkCycle_BytesWritten: the whole life of a 1 MiB task, as a
// queue at a steady backlog lives it: enqueue, claim and complete the
// task enqueued cycleBacklog tasks earlier, and every 16 tasks purge the
// ones whose retention (1 ns here) ended. Purged bodies become garbage in
// the blob files, so this shows what reclaiming them costs, besides what
// BenchmarkEnqueue_BytesWritten shows.
//
//	go test ./fsm -run '^$' -bench 'Cycle_BytesWritten' -benchtime 2000x
func BenchmarkCycle_BytesWritten(b *testing.B) {
	const cycleBacklog = 256 // 256 MiB: 8 memtables
	for _, inline := range []bool{true, false} {
		b.Run("payload=1048576/values="+valuesName(inline), func(b *testing.B) {
			w := newWrittenBench(b, 1<<20, inline)
			w.start(b)
			now := at(0)
			for i := range b.N {
				now += int64(time.Millisecond)
				task := nt("bench", "t", 0)
				task.Payload = w.payload(i)
				task.RetentionNs = 1
				w.l.f.Apply(w.l.entry(b, enqueueCmd(now, task)))
				if i < cycleBacklog {
					continue
				}
				res := w.l.f.Apply(w.l.entry(b, claimCmd(now, "bench", "t", "w", lease, 1))).(*pb.CommandResult)
				got := res.GetTasks()
				if len(got) != 1 {
					b.Fatalf("claim: %v", res.GetErrorDetail())
				}
				w.l.f.Apply(w.l.entry(b, completeCmd(now, got[0].GetId(), got[0].GetFence())))
				if i%16 == 0 {
					w.l.f.Apply(w.l.entry(b, purgeCmd(now+1, 1000)))
				}
			}
			w.stop(b)
		})
	}
}

// BenchmarkLife_BytesWritten: what one 128-byte task's life (enqueue,
// claim, complete, purge after a retention of 1 ns) costs one replica's
// disk, at a steady backlog of tasks enqueued and not yet claimed: a
// small one, whose tasks live and die inside one memtable, and one of
// 200,000, whose records reach the tables before they are claimed; and the
// small one again with each task enqueued delayed by 1 ms, which the next
// claim promotes, so every life also passes through the delayed index;
// and with an idempotency key on each task, as the Go client sends.
// logB/task is what the Raft log must hold for the life (the entries'
// Data and Extensions; raft-wal adds its frame per entry); the table
// columns are Pebble's, as in BenchmarkEnqueue_BytesWritten.
//
//	go test ./fsm -run '^$' -bench 'Life_BytesWritten' -benchtime 200000x
func BenchmarkLife_BytesWritten(b *testing.B) {
	for _, c := range []struct {
		backlog       int
		delayed, idem bool
	}{{256, false, false}, {200_000, false, false}, {256, true, false}, {256, false, true}} {
		backlog := c.backlog
		name := fmt.Sprintf("payload=128/backlog=%d", backlog)
		if c.delayed {
			name += "/delayed" // each task enqueued with a delay, promoted by its claim
		}
		if c.idem {
			name += "/idem" // each task with an idempotency key, as the Go client sends
		}
		b.Run(name, func(b *testing.B) {
			w := newWrittenBench(b, 128, false)
			now := at(0)
			var logBytes int
			apply := func(cmd *pb.Command) *pb.CommandResult {
				e := w.l.entry(b, cmd)
				logBytes += len(e.Data) + len(e.Extensions)
				return w.l.f.Apply(e).(*pb.CommandResult)
			}
			var delay time.Duration
			keys := 0
			fill := func(n int) {
				for range n {
					task := nt("bench", "t", 0)
					task.Payload, task.RetentionNs, task.DelayNs = w.payload(n), 1, int64(delay)
					if c.idem {
						keys++
						task.IdempotencyKey = fmt.Sprintf("0193b1a2-7c4d-7e5f-8a6b-%012x", keys) // a UUIDv7's length
					}
					apply(enqueueCmd(now, task))
				}
			}
			fill(backlog) // off the clock: the backlog the lives pass through
			if c.delayed {
				delay = time.Millisecond
			}
			w.start(b)
			logBytes = 0
			for i := range b.N {
				now += int64(time.Millisecond)
				fill(1)
				now += int64(delay)
				res := apply(claimCmd(now, "bench", "t", "w", lease, 1))
				got := res.GetTasks()
				if len(got) != 1 {
					b.Fatalf("claim: %v", res.GetErrorDetail())
				}
				apply(completeCmd(now, got[0].GetId(), got[0].GetFence()))
				if i%16 == 0 {
					apply(purgeCmd(now+1, 1000))
				}
			}
			w.stop(b)
			b.ReportMetric(float64(logBytes)/float64(b.N), "logB/task")
		})
	}
}

func valuesName(inline bool) string {
	if inline {
		return "inline"
	}
	return "separated"
}

// writtenBench is one FSM on the machine's disk behind a countingFS.
type writtenBench struct {
	fs       *countingFS
	l        *benchLog
	payloads [][]byte
	before   *pebble.Metrics
}

func newWrittenBench(b *testing.B, size int, inline bool) *writtenBench {
	fs := &countingFS{FS: vfs.Default}
	f, err := Open(b.TempDir(), Options{FS: fs, InlineValues: inline})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	w := &writtenBench{fs: fs, l: &benchLog{f: f}, payloads: make([][]byte, 64)}
	w.l.f.Apply(w.l.entry(b, latchCmd(benchLevel())))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range w.payloads {
		w.payloads[i] = make([]byte, size)
		for j := range w.payloads[i] {
			w.payloads[i][j] = byte(rng.Uint32())
		}
	}
	return w
}

func (w *writtenBench) payload(i int) []byte { return w.payloads[i%len(w.payloads)] }

func (w *writtenBench) start(b *testing.B) {
	w.fs.reset()
	w.before = w.l.f.db.Metrics()
	b.ResetTimer()
}

// stop flushes, stops the clock and reports the bytes per task.
func (w *writtenBench) stop(b *testing.B) {
	if err := w.l.f.db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after := w.l.f.db.Metrics()
	flushed, compacted := lsmBytes(w.before, after)
	n := float64(b.N)
	fs := w.fs
	b.ReportMetric(float64(fs.wal.Load())/n, "walB/task")
	b.ReportMetric(float64(fs.sst.Load())/n, "sstB/task")
	b.ReportMetric(float64(fs.blob.Load())/n, "blobB/task")
	b.ReportMetric(float64(flushed)/n, "flushB/task")
	b.ReportMetric(float64(compacted)/n, "compactB/task")
	b.ReportMetric(float64(fs.other.Load())/n, "otherB/task")
	b.ReportMetric(float64(fs.wal.Load()+fs.sst.Load()+fs.blob.Load()+fs.other.Load())/n, "B/task")
	b.ReportMetric(float64(after.DiskSpaceUsage())/n, "diskB/task")
}

// lsmBytes is what Pebble flushed and what its compactions wrote
// between two readings of its metrics.
func lsmBytes(before, after *pebble.Metrics) (flushed, compacted uint64) {
	for i := range after.Levels {
		a, o := &after.Levels[i], &before.Levels[i]
		flushed += a.TableBytesFlushed + a.BlobBytesFlushed - o.TableBytesFlushed - o.BlobBytesFlushed
		// Pebble v2.1.7 counts a flush's blob bytes as compacted too.
		compacted += a.TableBytesCompacted + a.BlobBytesCompacted - a.BlobBytesFlushed -
			(o.TableBytesCompacted + o.BlobBytesCompacted - o.BlobBytesFlushed)
	}
	return flushed, compacted
}

// countingFS counts the bytes written through it by kind of file.
type countingFS struct {
	vfs.FS
	wal, sst, blob, other atomic.Uint64
}

func (c *countingFS) reset() { c.wal.Store(0); c.sst.Store(0); c.blob.Store(0); c.other.Store(0) }

func (c *countingFS) counter(name string) *atomic.Uint64 {
	switch {
	case strings.HasSuffix(name, ".log"):
		return &c.wal
	case strings.HasSuffix(name, ".sst"):
		return &c.sst
	case strings.HasSuffix(name, ".blob"):
		return &c.blob
	}
	return &c.other
}

func (c *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.counter(name)}, nil
}

func (c *countingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.counter(newname)}, nil
}

func (c *countingFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.counter(name)}, nil
}

type countingFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(uint64(n))
	return n, err
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(uint64(n))
	return n, err
}
