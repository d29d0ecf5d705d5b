package transport

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
)

// Test_LagCancel: a forwarded Claim's context outlives its caller's cancel
// by claimCancelGrace, so an answer already on its way still arrives, and
// then ends; a deadline holds as it is.
func Test_LagCancel(t *testing.T) {
	caller, leave := context.WithCancel(context.Background())
	out, stop := lagCancel(caller)
	defer stop()
	leave()
	left := time.Now()
	if out.Err() != nil {
		t.Fatal("the forwarded call ended with its caller, with no grace")
	}
	testwait.For(t, 5*claimCancelGrace, "the grace to end", func() bool { return out.Err() != nil })
	if waited := time.Since(left); waited < claimCancelGrace-claimCancelGrace/10 {
		t.Fatalf("the forwarded call ended %v after its caller, before the grace of %v", waited, claimCancelGrace)
	}

	dl := time.Now().Add(time.Hour)
	caller, leave = context.WithDeadline(context.Background(), dl)
	defer leave()
	out, stop = lagCancel(caller)
	stop() // the call returned: the context ends at once
	if got, ok := out.Deadline(); !ok || !got.Equal(dl) {
		t.Fatalf("deadline %v %v, want the caller's %v", got, ok, dl)
	}
	if out.Err() == nil {
		t.Fatal("stop did not end the forwarded call's context")
	}
}
