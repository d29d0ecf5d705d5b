package dashboard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Rate history. The dashboard samples Stats every rateEvery and keeps,
// per queue and tenant, the last rateSamples lifetime totals (enqueued,
// completed) in a ring; the pages draw rates from them, so a page opens
// with its sparklines drawn. The totals are replicated state, so any
// dashboard of the cluster draws the same rates.
//
// With --auth the dashboard has no token of its own: it samples with the
// token of the viewer whose Stats (Queues or Queue page) the API accepted
// last, for viewerTTL after that, and forgets it at once when the API
// stops accepting it. Until a viewer opens one of those pages, nothing is
// sampled. A
// page shows history only for the rows its own viewer's Stats returned,
// so a viewer never learns of another tenant's queues.

const (
	rateEvery     = 2 * time.Second
	rateSamples   = 90 // 3 minutes at rateEvery
	maxRateQueues = 1000
	viewerTTL     = 10 * time.Minute
)

type rateKey struct{ queue, tenant string }

type rateSample struct {
	at        time.Time
	enq, done uint64
}

// rateRing is one queue's last rateSamples samples, oldest first from
// head.
type rateRing struct {
	buf  [rateSamples]rateSample
	head int // next slot to write
	n    int
}

func (r *rateRing) add(s rateSample) {
	r.buf[r.head] = s
	r.head = (r.head + 1) % rateSamples
	r.n = min(r.n+1, rateSamples)
}

// samples are the ring's samples, oldest first.
func (r *rateRing) samples() []rateSample {
	out := make([]rateSample, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.head-r.n+i+rateSamples)%rateSamples])
	}
	return out
}

type rateBook struct {
	mu       sync.Mutex
	m        map[rateKey]*rateRing
	viewer   string // the secret the sampler uses; "" with auth off
	viewerAt time.Time
}

func newRateBook() *rateBook { return &rateBook{m: map[rateKey]*rateRing{}} }

// sawViewer notes a viewer whose Stats the API accepted: the sampler may
// use its token.
func (b *rateBook) sawViewer(secret string) {
	b.mu.Lock()
	b.viewer, b.viewerAt = secret, time.Now()
	b.mu.Unlock()
}

func (b *rateBook) token() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.viewer == "" || time.Since(b.viewerAt) > viewerTTL {
		return "", false
	}
	return b.viewer, true
}

func (b *rateBook) forget(secret string) {
	b.mu.Lock()
	if b.viewer == secret {
		b.viewer = ""
	}
	b.mu.Unlock()
}

// record adds one sample per queue that has totals. A queue no sample
// saw for a whole ring is dropped; past maxRateQueues new queues wait.
func (b *rateBook) record(at time.Time, qs []*pb.QueueStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Gone queues first, so that their room goes to new ones.
	for k, r := range b.m {
		if last := r.buf[(r.head-1+rateSamples)%rateSamples].at; at.Sub(last) > rateSamples*rateEvery {
			delete(b.m, k)
		}
	}
	for _, q := range qs {
		if q.GetTotals() == nil {
			continue
		}
		k := rateKey{q.GetQueue(), q.GetTenant()}
		r, ok := b.m[k]
		if !ok {
			if len(b.m) >= maxRateQueues {
				continue
			}
			r = &rateRing{}
			b.m[k] = r
		}
		r.add(rateSample{at: at, enq: q.GetTotals().GetEnqueued(), done: q.GetTotals().GetCompleted()})
	}
}

// sampleRates runs until ctx ends: one Stats sample every rateEvery.
func (s *Server) sampleRates(ctx context.Context) {
	t := time.NewTicker(rateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sampleOnce(ctx)
		}
	}
}

func (s *Server) sampleOnce(ctx context.Context) {
	secret := ""
	if s.cfg.Auth {
		var ok bool
		if secret, ok = s.rates.token(); !ok {
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret)
	}
	var all []*pb.QueueStats
	cursor := ""
	for range statsPageLimit {
		resp, err := pb.NewQueueClient(s.conn).Stats(ctx, &pb.StatsRequest{Cursor: cursor})
		if status.Code(err) == codes.Unauthenticated || status.Code(err) == codes.PermissionDenied {
			s.rates.forget(secret)
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("dashboard rate sample", "err", err)
			}
			return
		}
		all = append(all, resp.GetQueues()...)
		if cursor = resp.GetNextCursor(); cursor == "" {
			break
		}
	}
	s.rates.record(time.Now(), all)
}

// spark is one sparkline as the template draws it.
type spark struct {
	Series string  // enq or done
	Points string  // SVG polyline points; "" when fewer than 2 samples
	Now    float64 // the latest rate, per second
	Peak   float64
}

// rateSeries are a queue's enqueue and completion sparklines.
type rateSeries struct{ Enq, Done spark }

// Sparkline geometry: the <svg> of the templates is sparkW x sparkH.
const (
	sparkW = 120.0
	sparkH = 24.0
)

// series draws the sparklines of a queue from its ring.
func (b *rateBook) series(queue, tenant string) rateSeries {
	b.mu.Lock()
	r, ok := b.m[rateKey{queue, tenant}]
	var ss []rateSample
	if ok {
		ss = r.samples()
	}
	b.mu.Unlock()
	rs := rateSeries{
		Enq:  drawSpark(ss, func(s rateSample) uint64 { return s.enq }),
		Done: drawSpark(ss, func(s rateSample) uint64 { return s.done }),
	}
	rs.Enq.Series, rs.Done.Series = "enq", "done"
	return rs
}

func drawSpark(ss []rateSample, v func(rateSample) uint64) spark {
	if len(ss) < 2 {
		return spark{}
	}
	rates := make([]float64, 0, len(ss)-1)
	for i := 1; i < len(ss); i++ {
		dt := ss[i].at.Sub(ss[i-1].at).Seconds()
		r := 0.0
		if a, b := v(ss[i-1]), v(ss[i]); dt > 0 && b > a {
			r = float64(b-a) / dt
		}
		rates = append(rates, r)
	}
	sp := spark{Now: rates[len(rates)-1]}
	for _, r := range rates {
		sp.Peak = max(sp.Peak, r)
	}
	top := max(1, sp.Peak)
	// Few samples spread over the width; once there are enough, each
	// keeps a fixed step and the oldest scroll off the left.
	step := max(sparkW/float64(rateSamples-2), sparkW/float64(max(1, len(rates)-1)))
	pts := make([]string, len(rates))
	for i, r := range rates {
		x := sparkW - float64(len(rates)-1-i)*step
		y := sparkH - 2 - r/top*(sparkH-4)
		pts[i] = fmt.Sprintf("%.1f,%.1f", x, y)
	}
	sp.Points = strings.Join(pts, " ")
	return sp
}
