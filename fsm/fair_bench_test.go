package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// The costs issue 33 bounds: a claim of a fair queue with 10,000 keys
// against a FIFO claim, and an enqueue with a key into a fair queue
// against one without into a FIFO queue. Run them by turns, alone:
//
//	go test ./fsm -run '^$' -bench 'Fair' -benchtime 20000x -count 5

// fairBenchKeys is the number of keys with pending tasks.
const fairBenchKeys = 10_000

// keyedBacklog enqueues n tasks of q spread over keys (none when keys
// is 0), round robin from *next, in entries of up to 1000 tasks.
func (l *benchLog) keyedBacklog(b testing.TB, q string, n, keys int, next *int) {
	for n > 0 {
		k := min(n, pb.MaxBatch)
		tasks := make([]*pb.NewTask, k)
		for i := range tasks {
			tasks[i] = nt(q, "t", 0)
			if keys > 0 {
				tasks[i].Key = []byte(fmt.Sprintf("customer-%05d", *next%keys))
				*next++
			}
		}
		if res := l.f.Apply(l.entry(b, enqueueCmd(at(0), tasks...))).(*pb.CommandResult); len(res.GetItems()) != k {
			b.Fatalf("backlog enqueue: %v", res.GetErrorDetail())
		}
		n -= k
	}
}

// fairBenchLog is an FSM at this build's level with queue q set fair
// when fair is set.
func fairBenchLog(b *testing.B, q string, fair bool) *benchLog {
	l := newBenchLog(b)
	l.f.Apply(l.entry(b, latchCmd(FeatureLevel)))
	if fair {
		res := l.f.Apply(l.entry(b, setPerKeyCmd(at(0), q, "t", 0, pb.QueueOrder_QUEUE_ORDER_FAIR))).(*pb.CommandResult)
		if c := res.GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
			b.Fatalf("set fair: %v %s", c, res.GetErrorDetail())
		}
	}
	return l
}

// BenchmarkClaim_Fair: one claim of one task per entry from a backlog of
// 100,000 tasks: FIFO with no keys, and FAIR over 10,000 keys.
func BenchmarkClaim_Fair(b *testing.B) {
	for _, fair := range []bool{false, true} {
		name := "order=fifo"
		if fair {
			name = fmt.Sprintf("order=fair,keys=%d", fairBenchKeys)
		}
		b.Run(name, func(b *testing.B) {
			keys := 0
			if fair {
				keys = fairBenchKeys
			}
			l, next := fairBenchLog(b, "bench", fair), 0
			l.keyedBacklog(b, "bench", 10*fairBenchKeys, keys, &next)
			claim := mustEncode(b, claimCmd(at(time.Second), "bench", "t", "w", lease, 1))
			const topUp = 500
			owed := 0
			var aside time.Duration // CPU of the top-ups, not of the claims
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				l.index++
				out := l.f.Apply(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: claim})
				if len(out.(*pb.CommandResult).GetTasks()) != 1 {
					b.Fatal("claim found nothing")
				}
				if owed++; owed == topUp {
					b.StopTimer()
					c := processCPU()
					l.keyedBacklog(b, "bench", topUp, keys, &next)
					aside += processCPU() - c
					owed = 0
					b.StartTimer()
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0-aside).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkEnqueue_Fair: one task per entry, 64 entries per ApplyBatch:
// without a key into a FIFO queue, with one of 10,000 keys into a FIFO
// queue (the key only stored), and into a fair queue.
func BenchmarkEnqueue_Fair(b *testing.B) {
	for _, c := range []struct {
		name      string
		fair, key bool
	}{{"fifo,no-key", false, false}, {"fifo,key", false, true}, {"fair,key", true, true}} {
		fair := c.fair
		b.Run(c.name, func(b *testing.B) {
			l := fairBenchLog(b, "bench", fair)
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				task := nt("bench", "t", 0)
				if c.key {
					task.Key = []byte(fmt.Sprintf("customer-%05d", i%fairBenchKeys))
				}
				logs[i] = l.entry(b, enqueueCmd(at(time.Duration(i)), task))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < len(logs); i += 64 {
				l.f.ApplyBatch(logs[i:min(i+64, len(logs))])
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
