package client

import (
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/proto/docketv1"
)

// Test_SubmitAndClaimAgainstAServerWithoutIt: the fake server predates
// SubmitBatch's claim, as an older release does: it ignores the field and
// answers the submits alone. SubmitAndClaim then returns their items and
// no task, and the caller goes on with Claim. Calls without a claim or a
// submit are refused before any RPC.
func Test_SubmitAndClaimAgainstAServerWithoutIt(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	ctx := ctxTimeout(t, 5*time.Second)
	mustEnqueue(t, c, "q", "a")
	mustEnqueue(t, c, "q", "b")
	tasks, err := c.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1, LeaseNs: int64(time.Minute)})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v, %v", tasks, err)
	}
	sub := &docketv1.SubmitRequest{TaskId: tasks[0].GetId(), Fence: tasks[0].GetFence(), Outcome: docketv1.Outcome_OUTCOME_COMPLETED}
	claim := &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1}
	if _, _, err := c.SubmitAndClaim(ctx, nil, sub); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no claim: %v, want ErrInvalidArgument", err)
	}
	if _, _, err := c.SubmitAndClaim(ctx, claim); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no submits: %v, want ErrInvalidArgument", err)
	}
	if n := fc.count(0, "SubmitBatch"); n != 0 {
		t.Fatalf("%d SubmitBatch RPCs for refused calls, want 0", n)
	}
	items, next, err := c.SubmitAndClaim(ctx, claim, sub)
	if err != nil || len(items) != 1 || items[0].GetCode() != docketv1.Code_CODE_OK || len(next) != 0 {
		t.Fatalf("submit and claim: %v, %v, %v; want the submit's OK and no task", items, next, err)
	}
	if got, err := c.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1}); err != nil || len(got) != 1 {
		t.Fatalf("the claim after: %v, %v; want the other task", got, err)
	}
}
