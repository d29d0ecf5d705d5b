package transport

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Issue 25: 16 loops without a token got 920 full keyspace hashes from a
// leader. With auth on, a hash needs an admin or reader token over every
// tenant; Status without it, and with check_index, stays open.
func Test_StatusHashNeedsToken(t *testing.T) {
	ts := mustLeader(t, Config{Auth: true})
	if err := ts.node.Service().Bootstrap(testCtx(t), adminSecret); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	ctx := testCtx(t)

	_, err := ts.c.Status(ctx, &pb.StatusRequest{WithHash: true})
	wantCode(t, "hash without a token", err, codes.Unauthenticated)
	_, err = ts.c.Status(as(ctx, "not-a-token"), &pb.StatusRequest{WithHash: true})
	wantCode(t, "hash with an unknown token", err, codes.Unauthenticated)
	producer := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker}, []string{pb.AllTenants}, 0)
	_, err = ts.c.Status(as(ctx, producer.GetSecret()), &pb.StatusRequest{WithHash: true})
	wantCode(t, "hash with a producer token", err, codes.PermissionDenied)
	readerA := mustToken(t, ts, []string{pb.RoleReader}, []string{"a"}, 0)
	_, err = ts.c.Status(as(ctx, readerA.GetSecret()), &pb.StatusRequest{WithHash: true})
	wantCode(t, "hash with a reader of one tenant", err, codes.PermissionDenied)
	if n := ts.srv.hashes.computed.Load(); n != 0 {
		t.Fatalf("refused calls computed %d hashes", n)
	}

	reader := mustToken(t, ts, []string{pb.RoleReader}, []string{pb.AllTenants}, 0)
	for _, secret := range []string{reader.GetSecret(), adminSecret} {
		st, err := ts.c.Status(as(ctx, secret), &pb.StatusRequest{WithHash: true})
		if err != nil || len(st.GetKeyspaceHash()) != 64 {
			t.Fatalf("hash with a reader or admin over every tenant: %q, %v", st.GetKeyspaceHash(), err)
		}
	}
	st, err := ts.c.Status(ctx, &pb.StatusRequest{CheckIndex: 1})
	if err != nil || st.GetKeyspaceHash() != "" {
		t.Fatalf("status without the hash and without a token: %v, %v", st, err)
	}
}

// Whoever asks, and however often, the node computes at most one hash per
// HashInterval; a caller never gets a hash older than its call unless the
// FSM has not moved since, and the answer's fsm_applied_index is the index
// the hash describes.
func Test_StatusHashComputedOncePerInterval(t *testing.T) {
	const every = 300 * time.Millisecond
	ts := mustLeader(t, Config{HashInterval: every})
	ctx := testCtx(t)
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Payload: []byte("a")})

	// 16 loops while nothing changes: one computation.
	hashLoops := func(n int, until time.Time) []*pb.StatusResponse {
		var (
			mu  sync.Mutex
			out []*pb.StatusResponse
			wg  sync.WaitGroup
		)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n && time.Now().Before(until); i++ {
					st, err := ts.c.Status(ctx, &pb.StatusRequest{WithHash: true})
					if err != nil {
						t.Errorf("status with hash: %v", err)
						return
					}
					mu.Lock()
					out = append(out, st)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return out
	}
	first := hashLoops(20, time.Now().Add(10*time.Second))
	if len(first) != 16*20 {
		t.Fatalf("%d answers, want %d", len(first), 16*20)
	}
	if n := ts.srv.hashes.computed.Load(); n != 1 {
		t.Fatalf("%d calls on an unchanged keyspace computed %d hashes, want 1", len(first), n)
	}
	for _, st := range first {
		if st.GetKeyspaceHash() != first[0].GetKeyspaceHash() || st.GetFsmAppliedIndex() != first[0].GetFsmAppliedIndex() {
			t.Fatalf("answers differ: %v and %v", st, first[0])
		}
	}

	// A write moves the FSM: the next caller waits for the interval and
	// gets a new hash at the new index.
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Payload: []byte("b")})
	st, err := ts.c.Status(ctx, &pb.StatusRequest{WithHash: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetKeyspaceHash() == first[0].GetKeyspaceHash() || st.GetFsmAppliedIndex() <= first[0].GetFsmAppliedIndex() {
		t.Fatalf("after a write: hash %s at %d, before %s at %d", st.GetKeyspaceHash(), st.GetFsmAppliedIndex(),
			first[0].GetKeyspaceHash(), first[0].GetFsmAppliedIndex())
	}

	// Writes and 16 hashing loops for 1.5 s: at most one hash per interval.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 10000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mustEnqueue(t, ts.q, &pb.NewTask{Queue: "w"})
		}
	}()
	before, start := ts.srv.hashes.computed.Load(), time.Now()
	answers := hashLoops(1000, start.Add(1500*time.Millisecond))
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	got := ts.srv.hashes.computed.Load() - before
	if limit := uint64(elapsed/every) + 1; got > limit || got < 2 {
		t.Fatalf("%d answers in %v under writes computed %d hashes, want 2..%d", len(answers), elapsed, got, limit)
	}
	t.Logf("%d answers in %v under writes computed %d hashes", len(answers), elapsed, got)
}
