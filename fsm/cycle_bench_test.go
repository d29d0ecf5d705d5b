package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkApplyBatch_Cycle is the batched cycle in miniature, at the
// level a new cluster latches (benchLevel): per round one Enqueue
// entry of 100 tasks, claims of up to 32 tasks until those are taken,
// and a submit per task, each kind in its own ApplyBatch, behind a
// standing backlog of pending tasks. So a claim reads records enqueued
// backlog/100 rounds before, as the consumer does when it keeps up. One
// op is one task's enqueue, claim and submit.
func BenchmarkApplyBatch_Cycle(b *testing.B) {
	const perRound, claimBatch = 100, 32
	for _, backlog := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			l := newCurrentBenchLog(b)
			l.backlog(b, "bench", backlog)
			tasks := make([]*pb.NewTask, perRound)
			for i := range tasks {
				tasks[i] = nt("bench", "t", 0)
			}
			enqueue := mustEncode(b, enqueueCmd(at(time.Second), tasks...))
			var claimData [][]byte // claims of 32, 32, 32 and 4 tasks
			for left := perRound; left > 0; left -= claimBatch {
				n := uint32(min(left, claimBatch))
				claimData = append(claimData, mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, n)))
			}
			var claims, submits []*raft.Log
			written := l.f.written.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += perRound {
				l.index++
				l.f.ApplyBatch([]*raft.Log{{Index: l.index, Term: 1, Type: raft.LogCommand, Data: enqueue}})
				claims = claims[:0]
				for _, data := range claimData {
					l.index++
					claims = append(claims, &raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: data})
				}
				submits = submits[:0]
				for _, out := range l.f.ApplyBatch(claims) {
					for _, t := range out.(*pb.CommandResult).GetTasks() {
						submits = append(submits, l.entry(b, completeCmd(at(time.Second), t.GetId(), t.GetFence())))
					}
				}
				for _, out := range l.f.ApplyBatch(submits) {
					if c := out.(*pb.CommandResult).GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
						b.Fatalf("submit: %v", c)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			b.ReportMetric(float64(l.f.written.Load()-written)/float64(b.N), "batchB/task")
		})
	}
}
