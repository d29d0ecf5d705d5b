package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// BenchmarkEnqueue_BytesWritten: what one enqueued task costs the disk
// under Pebble, by payload size, per task: bytes written to its WAL, to
// tables by flushes and by the compactions that ran meanwhile, and to
// everything else (MANIFEST, OPTIONS). The run ends with a flush, so
// what the memtables still hold counts as flushed. Payloads are random,
// as compression would hide real ones. Entries come in apply batches of
// the size Raft gives a busy node (one 1 MiB entry fills an append).
//
//	go test ./fsm -run '^$' -bench 'Enqueue_BytesWritten/payload=128$' -benchtime 20000x
//	go test ./fsm -run '^$' -bench 'Enqueue_BytesWritten/payload=1048576$' -benchtime 300x
func BenchmarkEnqueue_BytesWritten(b *testing.B) {
	for _, c := range []struct{ payload, batch int }{{128, 64}, {1 << 20, 1}} {
		b.Run(fmt.Sprintf("payload=%d", c.payload), func(b *testing.B) {
			fs := &countingFS{FS: vfs.Default}
			f, err := Open(b.TempDir(), Options{FS: fs})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = f.Close() })
			l := &benchLog{f: f}
			l.f.Apply(l.entry(b, latchCmd(FeatureLevel)))
			rng := rand.New(rand.NewPCG(1, 2))
			payloads := make([][]byte, 64)
			for i := range payloads {
				payloads[i] = make([]byte, c.payload)
				for j := range payloads[i] {
					payloads[i][j] = byte(rng.Uint32())
				}
			}
			logs := make([]*raft.Log, 0, c.batch)
			fs.reset()
			before := f.db.Metrics()
			b.ResetTimer()
			for i := range b.N {
				task := nt("bench", "t", 0)
				task.Payload = payloads[i%len(payloads)]
				logs = append(logs, l.entry(b, enqueueCmd(at(0), task)))
				if len(logs) == c.batch || i == b.N-1 {
					l.f.ApplyBatch(logs)
					logs = logs[:0]
				}
			}
			if err := f.db.Flush(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			after := f.db.Metrics()
			var flushed, compacted uint64
			for i := range after.Levels {
				flushed += after.Levels[i].TableBytesFlushed - before.Levels[i].TableBytesFlushed
				compacted += after.Levels[i].TableBytesCompacted - before.Levels[i].TableBytesCompacted
			}
			n := float64(b.N)
			b.ReportMetric(float64(fs.wal.Load())/n, "walB/task")
			b.ReportMetric(float64(flushed)/n, "flushB/task")
			b.ReportMetric(float64(compacted)/n, "compactB/task")
			b.ReportMetric(float64(fs.other.Load())/n, "otherB/task")
			b.ReportMetric(float64(fs.wal.Load()+fs.sst.Load()+fs.other.Load())/n, "B/task")
		})
	}
}

// countingFS counts the bytes written through it by kind of file.
type countingFS struct {
	vfs.FS
	wal, sst, other atomic.Uint64
}

func (c *countingFS) reset() { c.wal.Store(0); c.sst.Store(0); c.other.Store(0) }

func (c *countingFS) counter(name string) *atomic.Uint64 {
	switch {
	case strings.HasSuffix(name, ".log"):
		return &c.wal
	case strings.HasSuffix(name, ".sst"):
		return &c.sst
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
