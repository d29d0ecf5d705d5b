package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// BenchmarkDrain_Backlog: apply's cost per task of draining a backlog, as
// `docket bench --workload drain` does but without Raft and the network:
// a Claim of 100 tasks in one entry, then their 100 Submits in one apply
// batch, from a backlog filled just before (off the clock) so that the
// fill's flushes and compactions are still running. ns/op is per task
// drained. The drain of a 3-node cluster slows as its backlog grows;
// comparing the sizes here says how much of that is apply's own.
func BenchmarkDrain_Backlog(b *testing.B) {
	for _, size := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
			if size > 50_000 && testing.Short() {
				b.Skip("filling 1M tasks takes a while; skipped under -short")
			}
			// Each run drains from a backlog of its size, so a run never
			// outgrows what it filled; b.N is capped below.
			l := newCurrentBenchLog(b)
			m0 := l.f.db.Metrics()
			l.backlog(b, "bench", size)
			m1 := l.f.db.Metrics()
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 100))
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			drained := 0
			for drained < b.N && drained < size {
				l.index++
				res := l.f.Apply(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim}).(*pb.CommandResult)
				tasks := res.GetTasks()
				if len(tasks) == 0 {
					b.Fatal("claim found nothing")
				}
				logs := make([]*raft.Log, len(tasks))
				for i, t := range tasks {
					logs[i] = l.entry(b, completeCmd(at(2*time.Second), t.GetId(), t.GetFence()))
				}
				l.f.ApplyBatch(logs)
				drained += len(tasks)
			}
			// ns/task, not ns/op: a run stops at its backlog's end.
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(drained), "ns/task")
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(drained), "cpu-ns/task")
			// What the LSM wrote: the fill's flushes and compactions up to
			// its end, per task filled, and the drain's (the fill's
			// compactions that were still running among them), per task
			// drained.
			ff, fc := lsmBytes(m0, m1)
			df, dc := lsmBytes(m1, l.f.db.Metrics())
			b.ReportMetric(float64(ff)/float64(size), "fill-flushB/task")
			b.ReportMetric(float64(fc)/float64(size), "fill-compactB/task")
			b.ReportMetric(float64(df)/float64(drained), "flushB/task")
			b.ReportMetric(float64(dc)/float64(drained), "compactB/task")
			m2 := l.f.db.Metrics()
			b.ReportMetric(float64(m2.BlockCache.Misses-m1.BlockCache.Misses)/float64(drained), "cacheMiss/task")
			b.ReportMetric(float64(m2.BlockCache.Hits-m1.BlockCache.Hits)/float64(drained), "cacheHit/task")
		})
	}
}

// BenchmarkOpen_Backlog: what Open costs a node that restarts holding a
// backlog of 128-byte pending tasks: reading the metadata, building the
// claim view, the idempotency filter and the ready order. ns/op is one
// Open after a clean Close (nothing to replay); ready-ns/op is the ready
// order's share, timed alone on the same keyspace.
func BenchmarkOpen_Backlog(b *testing.B) {
	for _, size := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
			if size > 50_000 && testing.Short() {
				b.Skip("filling 1M tasks takes a while; skipped under -short")
			}
			dir := b.TempDir()
			f, err := Open(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			l := &benchLog{f: f}
			l.f.Apply(l.entry(b, latchCmd(benchLevel())))
			l.backlog(b, "bench", size)
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			var ready time.Duration
			b.ResetTimer()
			for range b.N {
				f, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				start := time.Now()
				if err := newReadyOrder().rebuild(storage.Wrap(f.db)); err != nil {
					b.Fatal(err)
				}
				ready += time.Since(start)
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(ready.Nanoseconds())/float64(b.N), "ready-ns/op")
		})
	}
}
