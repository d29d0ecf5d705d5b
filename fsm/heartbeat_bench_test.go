package fsm

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkHeartbeat_Bytes: what one heartbeat costs the disk, by payload
// size. A heartbeat changes a few fields (lease, attempt), but the task is
// one record, so apply rewrites it whole, payload included. walB/hb is
// the bytes of apply's batches per heartbeat (what Pebble's WAL took in
// when it had one; what is flushed and later compacted),
// the figure a split into an immutable body and a small header would cut.
//
//	go test ./fsm -run '^$' -bench Heartbeat_Bytes -benchtime 2000x
func BenchmarkHeartbeat_Bytes(b *testing.B) {
	for _, size := range []int{128, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			l := newBenchLog(b)
			l.f.Apply(l.entry(b, latchCmd(FeatureLevel)))
			task := nt("bench", "t", 0)
			task.Payload = make([]byte, size)
			l.f.Apply(l.entry(b, enqueueCmd(at(0), task)))
			res := l.f.Apply(l.entry(b, claimCmd(at(time.Second), "bench", "t", "w", time.Hour, 1))).(*pb.CommandResult)
			if len(res.GetTasks()) != 1 {
				b.Fatalf("claim: %v", res.GetErrorDetail())
			}
			t := res.GetTasks()[0]
			before := l.f.written.Load()
			b.ResetTimer()
			for i := range b.N {
				hb := heartbeatCmd(at(2*time.Second+time.Duration(i)), &pb.HeartbeatItem{TaskId: t.GetId(), Fence: t.GetFence()})
				out := l.f.Apply(l.entry(b, hb)).(*pb.CommandResult)
				if c := out.GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
					b.Fatalf("heartbeat %d: %v", i, c)
				}
			}
			b.StopTimer()
			written := l.f.written.Load() - before
			b.ReportMetric(float64(written)/float64(b.N), "walB/hb")
		})
	}
}
