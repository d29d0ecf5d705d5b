package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// docketFails runs a verb that must fail and returns its error text.
func docketFails(t *testing.T, addrs string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	full := append([]string{args[0], "--addr", addrs}, args[1:]...)
	err := run(ctx, full, &out, &errb)
	if err == nil {
		t.Fatalf("docket %s succeeded: %s", strings.Join(args, " "), out.String())
	}
	return err.Error() + errb.String()
}

// Test_CLITaskTenant: `docket task ID --tenant T` reads the task as
// tenant T: another tenant's task is not found, its own is shown.
func Test_CLITaskTenant(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	id := strings.Fields(docket(t, addrs, "enqueue", "mail", "x", "--tenant", "acme"))[0]
	if out := docket(t, addrs, "task", id, "--tenant", "acme"); !strings.Contains(out, "mail/acme") {
		t.Fatalf("task as its tenant printed %q", out)
	}
	if out := docketFails(t, addrs, "task", id, "--tenant", "other"); !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("task as another tenant: %q, want not found", out)
	}
	if out := docketFails(t, addrs, "task", "--tenant", "other", id); !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("task with --tenant before the id: %q, want not found", out)
	}
}

// Test_CLIRetries: the retry verbs as the README tour runs them, text and
// --json: a queue's policy delays a nacked task, snooze keeps attempts,
// task update moves a waiting task and is refused for a running one,
// tasks and dlq list find tasks, and reset drops the configuration.
func Test_CLIRetries(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	// The leader latches the build's level shortly after it starts.
	testwait.For(t, 10*time.Second, "feature level 12", func() bool {
		return nodes[0].node.FSM().EnabledLevel() >= fsm.LevelRetries
	})
	claim := func(queue string) (id, fence string) {
		t.Helper()
		m := regexp.MustCompile(`^(\S+) fence=(\d+) `).FindStringSubmatch(docket(t, addrs, "claim", queue))
		if m == nil {
			t.Fatalf("claim of %s took nothing", queue)
		}
		return m[1], m[2]
	}

	if s := docket(t, addrs, "queue", "retry", "jobs", "--base", "1h", "--cap", "4h", "--jitter", "0"); !strings.Contains(s, "jobs/default retries after 1h0m0s, x2, capped at 4h0m0s") {
		t.Fatalf("queue retry printed %q", s)
	}
	if s := docket(t, addrs, "queue", "retry", "jobs", "--base", "1h", "--cap", "4h", "--jitter", "0", "--json"); strings.TrimSpace(s) != "{}" {
		t.Fatalf("second queue retry --json printed %q, want unchanged", s)
	}
	docket(t, addrs, "enqueue", "jobs", "a")
	id, fence := claim("jobs")
	if s := docket(t, addrs, "nack", id, fence); strings.TrimSpace(s) != "DELAYED" {
		t.Fatalf("nack under a 1h backoff printed %q, want DELAYED", s)
	}
	if s := docket(t, addrs, "tasks", "jobs", "--state", "delayed"); !regexp.MustCompile(`^ID +PRIO +FAILED +VISIBLE AT +PAYLOAD\n` + id + ` +0 +1/5 +\S+ +a\n`).MatchString(s) {
		t.Fatalf("tasks --state delayed printed %q", s)
	}
	if s := docket(t, addrs, "task", "update", id, "--priority", "7", "--in", "0s"); strings.TrimSpace(s) != id+" PENDING" {
		t.Fatalf("task update printed %q", s)
	}
	id2, fence2 := claim("jobs")
	if id2 != id {
		t.Fatalf("claimed %s, want the updated %s", id2, id)
	}
	if s := docketFails(t, addrs, "task", "update", id, "--priority", "1"); !strings.Contains(strings.ToLower(s), "state") {
		t.Fatalf("update of a running task: %q, want a wrong-state error", s)
	}
	if s := docket(t, addrs, "snooze", id, fence2, "--for", "1h", "--json"); !strings.Contains(s, "TASK_STATE_DELAYED") {
		t.Fatalf("snooze --json printed %q", s)
	}
	var task struct{ Attempts int }
	if err := json.Unmarshal([]byte(docket(t, addrs, "task", id, "--json")), &task); err != nil || task.Attempts != 1 {
		t.Fatalf("after snooze: %+v %v, want the one attempt of the nack", task, err)
	}

	// Dead letters of two queues, found with one dlq list.
	for _, q := range []string{"mail", "sms"} {
		docket(t, addrs, "queue", "dead-retention", q, "1h")
		docket(t, addrs, "enqueue", q, "x", "--max-attempts", "1")
		qid, qf := claim(q)
		docket(t, addrs, "nack", qid, qf)
	}
	out := docket(t, addrs, "dlq", "list")
	if !regexp.MustCompile(`(?m)^ID +QUEUE +ATTEMPTS +ERROR +PAYLOAD$`).MatchString(out) ||
		!regexp.MustCompile(`(?m) mail +1/1 +- +x$`).MatchString(out) || !regexp.MustCompile(`(?m) sms +1/1 +- +x$`).MatchString(out) {
		t.Fatalf("dlq list of every queue printed %q", out)
	}
	var page struct {
		Tasks      []struct{ ID string }
		NextCursor string
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "dlq", "list", "--limit", "1", "--json")), &page); err != nil || len(page.Tasks) != 1 || page.NextCursor == "" {
		t.Fatalf("dlq list --limit 1 --json: %+v %v", page, err)
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "dlq", "list", "--limit", "1", "--cursor", page.NextCursor, "--json")), &page); err != nil || len(page.Tasks) != 1 {
		t.Fatalf("dlq list's second page: %+v %v", page, err)
	}

	if s := docket(t, addrs, "queue", "reset", "jobs"); strings.TrimSpace(s) != "jobs/default reset to the defaults" {
		t.Fatalf("queue reset printed %q", s)
	}
}

// Test_ClientRetriesErrors: the Go client's retry methods against a real
// node answer the sentinels a caller branches on: ErrWrongState for an
// update of a running task, ErrStaleFence for a snooze under an old fence,
// ErrInvalidArgument naming nothing to change.
func Test_ClientRetriesErrors(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	testwait.For(t, 10*time.Second, "feature level 12", func() bool {
		return nodes[0].node.FSM().EnabledLevel() >= fsm.LevelRetries
	})
	c := mustClient(t, addrsOf(nodes)...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Enqueue(ctx, &pb.NewTask{Queue: "q", Payload: []byte("x"),
		Retry: &pb.RetryPolicy{BaseNs: int64(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	task := tasks[0]
	nine := uint32(9)
	if _, err := c.UpdateTask(ctx, task.GetId(), client.TaskUpdate{Priority: &nine}); !errors.Is(err, client.ErrWrongState) {
		t.Fatalf("update of a running task: %v, want ErrWrongState", err)
	}
	if _, err := c.UpdateTask(ctx, task.GetId(), client.TaskUpdate{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("update with nothing: %v, want ErrInvalidArgument", err)
	}
	if st, err := c.Snooze(ctx, task.GetId(), task.GetFence(), 0); err != nil || st != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("snooze: %v %v", st, err)
	}
	if _, err := c.Snooze(ctx, task.GetId(), task.GetFence(), 0); !errors.Is(err, client.ErrStaleFence) {
		t.Fatalf("second snooze: %v, want ErrStaleFence", err)
	}
	// The task's own policy was stored: a nack now waits an hour.
	tasks, err = c.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim after snooze: %v %v", tasks, err)
	}
	st, err := c.Nack(ctx, &pb.NackRequest{TaskId: tasks[0].GetId(), Fence: tasks[0].GetFence()})
	if err != nil || st != pb.TaskState_TASK_STATE_DELAYED {
		t.Fatalf("nack under the task's policy: %v %v, want DELAYED", st, err)
	}
	got, err := c.ReadTask(ctx, task.GetId())
	if err != nil || got.GetAttempts() != 1 || got.GetVisibleAt()-time.Now().UnixNano() < int64(50*time.Minute) {
		t.Fatalf("after the nack: %v %v", got, err)
	}
}
