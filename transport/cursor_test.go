package transport

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// deadLetters enqueues n tasks of queue q (tenant acme) that dead-letter on
// their first nack, and dead-letters them.
func deadLetters(t *testing.T, ts *testServer, n int) {
	t.Helper()
	ctx := testCtx(t)
	for range n {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Tenant: "acme", MaxAttempts: 1})
		resp, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", Tenant: "acme", WorkerId: "w"})
		if err != nil || len(resp.GetTasks()) != 1 {
			t.Fatalf("claim: %v, %v", resp, err)
		}
		task := resp.GetTasks()[0]
		if _, err := ts.q.Nack(ctx, &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence()}); err != nil {
			t.Fatalf("nack: %v", err)
		}
	}
}

// Test_BadCursorIsInvalidArgument: a cursor that is not one this listing
// handed out is the caller's mistake, InvalidArgument naming "cursor",
// never Internal; the raw keys older builds handed out included.
func Test_BadCursorIsInvalidArgument(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	deadLetters(t, ts, 2)
	first, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Queue: "q", Tenant: "acme", Limit: 1})
	if err != nil || first.GetNextCursor() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	for name, cursor := range map[string]string{
		"garbage":        "%%%",
		"base64 garbage": "AAAAAAAA",
		"other queue":    first.GetNextCursor(), // asked of queue "other" below
		"raw key":        "q/other/acme/x/zzz",
	} {
		_, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Queue: "other", Tenant: "acme", Cursor: cursor})
		if code, _, field := details(err); code != codes.InvalidArgument || field != "cursor" {
			t.Errorf("ListDead %s %q: %v, want InvalidArgument on cursor", name, cursor, err)
		}
		_, err = ts.q.Stats(ctx, &pb.StatsRequest{Queue: "other", Cursor: cursor})
		if code, _, field := details(err); code != codes.InvalidArgument || field != "cursor" {
			t.Errorf("Stats %s %q: %v, want InvalidArgument on cursor", name, cursor, err)
		}
	}
}

// Test_ListDeadCursorIsOpaque: the cursor a page hands out shows no key,
// and passing it back pages through every dead letter once.
func Test_ListDeadCursorIsOpaque(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	deadLetters(t, ts, 3)
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("cursor never ended")
		}
		page, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Queue: "q", Tenant: "acme", Cursor: cursor, Limit: 1})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, task := range page.GetTasks() {
			if seen[task.GetId()] {
				t.Fatalf("%s listed twice", task.GetId())
			}
			seen[task.GetId()] = true
		}
		if cursor = page.GetNextCursor(); cursor == "" {
			break
		}
		if strings.Contains(cursor, "acme") || strings.ContainsAny(cursor, "/\x00") {
			t.Fatalf("cursor %q shows a key", cursor)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("listed %d of 3 dead letters", len(seen))
	}
}
