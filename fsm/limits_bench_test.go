package fsm

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkApplyBatch_ClaimSubmit_Limits: BenchmarkApplyBatch_ClaimSubmit
// at batch 64, at level 7 and at LevelLimits, without limits and with
// each kind set high enough never to stop a claim: what checking (and for
// the rate, rewriting the configuration record) costs on the claim path.
// One op is one claim+submit pair.
func BenchmarkApplyBatch_ClaimSubmit_Limits(b *testing.B) {
	const batch = 64
	for _, c := range []struct {
		name  string
		level uint32
		set   []*pb.Command
	}{
		{"level7", LevelQueueControl, nil}, // before the latch: no running count
		{"none", LevelLimits, nil},
		{"concurrency", LevelLimits, []*pb.Command{limitsCmd(t0, "bench", "t", u32(1_000_000), nil, nil)}},
		{"rate", LevelLimits, []*pb.Command{limitsCmd(t0, "bench", "t", nil, u64(MaxRateMilli), u32(MaxBurst))}},
		{"tenant", LevelLimits, []*pb.Command{limitsCmd(t0, "", "t", u32(1_000_000), nil, nil)}},
		{"all", LevelLimits, []*pb.Command{limitsCmd(t0, "bench", "t", u32(1_000_000), u64(MaxRateMilli), u32(MaxBurst)),
			limitsCmd(t0, "", "t", u32(1_000_000), nil, nil)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := newBenchLog(b)
			l.f.Apply(l.entry(b, latchCmd(c.level)))
			for _, cmd := range c.set {
				l.f.Apply(l.entry(b, cmd))
			}
			l.backlog(b, "bench", b.N)
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 1))
			claims := make([]*raft.Log, batch)
			submits := make([]*raft.Log, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(batch, b.N-done)
				for i := range claims[:n] {
					l.index++
					claims[i] = &raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim}
				}
				submits = submits[:0]
				for _, out := range l.f.ApplyBatch(claims[:n]) {
					tasks := out.(*pb.CommandResult).GetTasks()
					if len(tasks) != 1 {
						b.Fatalf("a claim took %d tasks", len(tasks))
					}
					submits = append(submits, l.entry(b, completeCmd(at(time.Second), tasks[0].GetId(), tasks[0].GetFence())))
				}
				l.f.ApplyBatch(submits)
				done += n
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}
