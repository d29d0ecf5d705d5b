package dashboard

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func statsAt(queue string, enq uint64) *pb.QueueStats {
	return &pb.QueueStats{Queue: queue, Tenant: "default", Totals: &pb.QueueTotals{Enqueued: enq}}
}

// Test_RateRingKeepsTheNewest: past rateSamples samples the ring keeps the
// newest, oldest first, and the drawn rate is the last step's.
func Test_RateRingKeepsTheNewest(t *testing.T) {
	b := newRateBook()
	t0 := time.Unix(1000, 0)
	for i := range rateSamples + 10 {
		b.record(t0.Add(time.Duration(i)*rateEvery), []*pb.QueueStats{statsAt("q", uint64(i*i))})
	}
	ss := b.m[rateKey{"q", "default"}].samples()
	if len(ss) != rateSamples || ss[0].enq != 100 || ss[len(ss)-1].enq != uint64((rateSamples+9)*(rateSamples+9)) {
		t.Fatalf("ring holds %d samples from %d to %d", len(ss), ss[0].enq, ss[len(ss)-1].enq)
	}
	sp := b.series("q", "default").Enq
	last := rateSamples + 9
	if want := float64(last*last-(last-1)*(last-1)) / rateEvery.Seconds(); sp.Now != want || sp.Peak != want {
		t.Fatalf("rate now %v peak %v, want %v", sp.Now, sp.Peak, want)
	}
}

// Test_RateBookBounded: the book holds at most maxRateQueues queues, and
// drops a queue no sample saw for a whole ring.
func Test_RateBookBounded(t *testing.T) {
	b := newRateBook()
	t0 := time.Unix(1000, 0)
	many := make([]*pb.QueueStats, maxRateQueues+50)
	for i := range many {
		many[i] = statsAt(fmt.Sprintf("q%d", i), 1)
	}
	b.record(t0, many)
	if len(b.m) != maxRateQueues {
		t.Fatalf("book holds %d queues, want %d", len(b.m), maxRateQueues)
	}
	b.record(t0.Add(rateSamples*rateEvery+time.Second), []*pb.QueueStats{statsAt("fresh", 1)})
	if len(b.m) != 1 {
		t.Fatalf("after a whole ring without them the book holds %d queues, want 1", len(b.m))
	}
}
