package client

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Test_EveryServerReasonIsMapped: the client knows what each reason a
// server can send means. A reason added to docketv1 without a mapping here
// fails this test, and so does one the client maps to a sentinel other
// than the one its meaning calls for.
func Test_EveryServerReasonIsMapped(t *testing.T) {
	want := map[string]error{
		docketv1.ReasonStaleFence:      ErrStaleFence,
		docketv1.ReasonWrongState:      ErrWrongState,
		docketv1.ReasonTenantLimit:     ErrTenantLimit,
		docketv1.ReasonMemoryLimit:     ErrMemoryLimit,
		docketv1.ReasonFeatureDisabled: ErrFeatureDisabled,
		docketv1.ReasonTimedOut:        ErrTimedOut,
		docketv1.ReasonCancelled:       ErrCancelled,
		docketv1.ReasonLeadershipLost:  ErrOutcomeUnknown,
		// Nothing was done: retry on another node or the leader.
		docketv1.ReasonNotLeader:    ErrNoLeader,
		docketv1.ReasonShuttingDown: ErrNoLeader,
		docketv1.ReasonOverloaded:   ErrNoLeader,
		docketv1.ReasonNotServing:   ErrNoLeader,
	}
	for reason, code := range docketv1.ReasonCodes() {
		w, ok := want[reason]
		if !ok {
			t.Errorf("reason %s (%v) has no mapping in the client", reason, code)
			continue
		}
		st, err := status.New(code, "msg").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: docketv1.ErrorDomain})
		if err != nil {
			t.Fatal(err)
		}
		if got := mapError(st.Err()); !errors.Is(got, w) || status.Code(got) != code {
			t.Errorf("%v %s maps to %v (code %v), want %v", code, reason, got, status.Code(got), w)
		}
	}
	for reason := range want {
		if _, ok := docketv1.ReasonCodes()[reason]; !ok {
			t.Errorf("the client maps %s, which no server sends", reason)
		}
	}
}
