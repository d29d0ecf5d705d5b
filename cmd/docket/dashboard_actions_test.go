package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// task is the task as the bootstrap token reads it on node 0.
func (f *dashFixture) task(ctx context.Context, id string) *pb.Task {
	f.t.Helper()
	c := metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+dashBoot)
	resp, err := rawQueue(f.t, f.nodes[0].grpcAddr).GetTask(c, &pb.GetTaskRequest{TaskId: id})
	if err != nil {
		f.f("get %s: %v", id, err)
	}
	return resp.GetTask()
}

// queueStats is the default tenant's queue q as Stats counts it.
func (f *dashFixture) queueStats(ctx context.Context, q string) *pb.QueueStats {
	f.t.Helper()
	qs, err := f.admin.Stats(ctx, q, pb.DefaultTenant)
	if err != nil || len(qs) != 1 {
		f.f("stats %s: %v %v", q, qs, err)
	}
	return qs[0]
}

// waitQueueControl waits until the cluster accepts queue control (its
// feature level latches shortly after start).
func (f *dashFixture) waitQueueControl(ctx context.Context) {
	f.t.Helper()
	testwait.For(f.t, 30*time.Second, "queue control enabled", func() bool {
		_, err := f.admin.ResumeQueue(ctx, "-probe-", "")
		if err != nil && !errors.Is(err, client.ErrFeatureDisabled) {
			f.f("resume: %v", err)
		}
		return err == nil
	})
}

// act posts an action form as the page renders it: the form token of
// back, and back itself.
func (b *browser) act(path, back string, fields url.Values) (*http.Response, string) {
	b.t.Helper()
	fields.Set("csrf", b.csrf(back))
	fields.Set("back", back)
	return b.post(path, fields)
}

// followFlash follows an action's redirect and returns the flash shown.
func (b *browser) followFlash(resp *http.Response, body string) string {
	b.t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("action answered %d, want 303:\n%s", resp.StatusCode, body)
	}
	_, page := b.get(resp.Header.Get("Location"))
	i := strings.Index(page, `id="flash">`)
	if i < 0 {
		b.t.Fatalf("no flash on %s:\n%s", resp.Header.Get("Location"), page)
	}
	j := strings.Index(page[i:], "</p>")
	return page[i+len(`id="flash">`) : i+j]
}

// Test_DashboardQueueActions: an admin pauses, resumes and purges a queue
// and deletes its dead letters from the Queue page; the destructive ones
// ask for a confirmation first and do nothing until it is given.
func Test_DashboardQueueActions(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	f.waitQueueControl(ctx)
	f.deadLetter(ctx, "mail", "default") // first: it claims the queue's head
	for range 3 {
		if _, err := f.admin.EnqueueOne(ctx, "mail", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	b := f.browser()
	b.login(dashBoot)
	page := "/queue?queue=mail&tenant=default"
	q := url.Values{"queue": {"mail"}, "tenant": {"default"}}

	if got := b.followFlash(b.act("/queue/pause", page, q)); !strings.Contains(got, "Paused mail") {
		t.Fatalf("pause flash %q", got)
	}
	if !f.queueStats(ctx, "mail").GetPaused() {
		t.Fatal("mail is not paused after the pause")
	}
	if _, body := b.get(page); !strings.Contains(body, `id="paused"`) || !strings.Contains(body, "act-resume") {
		t.Fatalf("the queue page of a paused queue shows no badge or resume:\n%s", body)
	}
	if got := b.followFlash(b.act("/queue/resume", page, q)); !strings.Contains(got, "Resumed mail") {
		t.Fatalf("resume flash %q", got)
	}
	if f.queueStats(ctx, "mail").GetPaused() {
		t.Fatal("mail is paused after the resume")
	}

	// Purge: the first post asks, and changes nothing.
	resp, body := b.act("/queue/purge", page, q)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="question"`) || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("purge without confirm: %d\n%s", resp.StatusCode, body)
	}
	if n := f.queueStats(ctx, "mail").GetPending(); n != 3 {
		t.Fatalf("pending after an unconfirmed purge: %d, want 3", n)
	}
	q.Set("confirm", "yes")
	if got := b.followFlash(b.act("/queue/purge", page, q)); !strings.Contains(got, "3 pending or delayed tasks deleted") {
		t.Fatalf("purge flash %q", got)
	}
	st := f.queueStats(ctx, "mail")
	if st.GetPending() != 0 || st.GetDead() != 1 {
		t.Fatalf("after the purge: %d pending, %d dead; want 0 and 1", st.GetPending(), st.GetDead())
	}
	if got := b.followFlash(b.act("/queue/purge-dead", page, q)); !strings.Contains(got, "Deleted 1 dead letter of mail") {
		t.Fatalf("purge-dead flash %q", got)
	}
	if qs, err := f.admin.Stats(ctx, "mail", pb.DefaultTenant); err != nil || len(qs) == 1 && qs[0].GetDead() != 0 {
		t.Fatalf("after deleting the dead letters: %v %v", qs, err)
	}
}

// Test_DashboardTaskActions: an admin reprioritises a pending task, runs
// a delayed one now, requeues a dead letter and cancels a pending task
// (after a confirmation) from the pages' forms.
func Test_DashboardTaskActions(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "the retries level", func() bool { return f.nodes[0].node.FSM().EnabledLevel() >= 12 })
	dead := f.deadLetter(ctx, "jobs", "default") // first: it claims the queue's head
	pending, err := f.admin.EnqueueOne(ctx, "jobs", []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	delayed, err := f.admin.EnqueueOne(ctx, "jobs", []byte("d"), client.TaskDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.login(dashBoot)
	task := func(id string) url.Values { return url.Values{"id": {id}, "tenant": {"default"}} }

	// The Queue page offers each state's actions.
	if _, body := b.get("/queue?queue=jobs&state=pending"); !strings.Contains(body, "act-priority") || !strings.Contains(body, "act-cancel") {
		t.Fatalf("pending tab has no priority or cancel form:\n%s", body)
	}
	form := task(pending)
	form.Set("priority", "7")
	if got := b.followFlash(b.act("/task/priority", "/queue?queue=jobs", form)); !strings.Contains(got, "priority 7") {
		t.Fatalf("priority flash %q", got)
	}
	if p := f.task(ctx, pending).GetPriority(); p != 7 {
		t.Fatalf("priority after the form: %d, want 7", p)
	}
	form.Set("priority", "12")
	if resp, _ := b.act("/task/priority", "/queue?queue=jobs", form); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("priority 12: %d, want 400", resp.StatusCode)
	}

	if _, body := b.get("/queue?queue=jobs&state=delayed"); !strings.Contains(body, `data-id="`+delayed+`"`) || !strings.Contains(body, "act-retry") {
		t.Fatalf("delayed tab has no run-now form for %s:\n%s", delayed, body)
	}
	if got := b.followFlash(b.act("/task/retry", "/queue?queue=jobs&state=delayed", task(delayed))); !strings.Contains(got, "runs now") {
		t.Fatalf("retry flash %q", got)
	}
	if st := f.state(ctx, delayed, "default"); st != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("after run now the task is %v, want pending", st)
	}

	if got := b.followFlash(b.act("/task/requeue", "/task?id="+dead, task(dead))); !strings.Contains(got, "Requeued "+dead) {
		t.Fatalf("requeue flash %q", got)
	}
	if st := f.state(ctx, dead, "default"); st != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("after requeue the task is %v, want pending", st)
	}
	// Requeueing it again is refused with a sentence, not a 502.
	if resp, body := b.act("/task/requeue", "/task?id="+dead, task(dead)); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "is not a dead letter") {
		t.Fatalf("requeue of a pending task: %d\n%s", resp.StatusCode, body)
	}

	resp, body := b.act("/task/cancel", "/task?id="+pending, task(pending))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Cancel task "+pending) {
		t.Fatalf("cancel without confirm: %d\n%s", resp.StatusCode, body)
	}
	if st := f.state(ctx, pending, "default"); st != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("after an unconfirmed cancel the task is %v", st)
	}
	form = task(pending)
	form.Set("confirm", "yes")
	if got := b.followFlash(b.act("/task/cancel", "/task?id="+pending, form)); !strings.Contains(got, "Cancelled "+pending) {
		t.Fatalf("cancel flash %q", got)
	}
	if st := f.state(ctx, pending, "default"); st != pb.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("after cancel the task is %v, want cancelled", st)
	}
}

// Test_DashboardReaderIsReadOnly: a reader sees no action forms, and an
// action it posts anyway is refused by the API and shown as such.
func Test_DashboardReaderIsReadOnly(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	f.waitQueueControl(ctx)
	id, err := f.admin.EnqueueOne(ctx, "mail", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.login(f.token(ctx, []string{pb.RoleReader}, []string{pb.AllTenants}))
	for _, p := range []string{"/queues", "/queue?queue=mail", "/task?id=" + id} {
		resp, body := b.get(p)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, `class="act-`) {
			t.Fatalf("reader's %s: %d, with action forms:\n%s", p, resp.StatusCode, body)
		}
	}
	resp, body := b.act("/queue/pause", "/queue?queue=mail", url.Values{"queue": {"mail"}, "tenant": {"default"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `id="refused"`) || !strings.Contains(body, `href="/queue?queue=mail" id="back"`) {
		t.Fatalf("reader's pause: %d\n%s", resp.StatusCode, body)
	}
	if f.queueStats(ctx, "mail").GetPaused() {
		t.Fatal("a reader paused the queue")
	}
}

// Test_DashboardBrowseByState: the Queue page lists a queue's tasks of
// one state, 50 a page with a link to the next, and the Queues page links
// each queue and count there.
func Test_DashboardBrowseByState(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	tasks := make([]*pb.NewTask, 60)
	for i := range tasks {
		tasks[i] = &pb.NewTask{Queue: "bulk", Payload: []byte("x")}
	}
	if _, err := f.admin.Enqueue(ctx, tasks...); err != nil {
		t.Fatal(err)
	}
	delayed, err := f.admin.EnqueueOne(ctx, "bulk", []byte("later"), client.TaskDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.login(dashBoot)
	_, body := b.get("/queues")
	for _, link := range []string{`href="/queue?queue=bulk&amp;tenant=default"`, `href="/queue?queue=bulk&amp;tenant=default&amp;state=delayed">1<`} {
		if !strings.Contains(body, link) {
			t.Fatalf("queues page has no link %s:\n%s", link, body)
		}
	}
	_, body = b.get("/queue?queue=bulk&tenant=default&state=pending")
	if n := strings.Count(body, "<tr data-id="); n != 50 {
		t.Fatalf("first pending page lists %d tasks, want 50", n)
	}
	if !strings.Contains(body, `data-state="pending" class="on">pending <b>60</b>`) {
		t.Fatalf("pending tab does not count 60:\n%s", body)
	}
	i := strings.Index(body, `href="/queue?`+"queue=bulk&amp;tenant=default&amp;state=pending&amp;cursor=")
	if i < 0 {
		t.Fatalf("no next page link:\n%s", body)
	}
	next := body[i+len(`href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	if _, body = b.get(next); strings.Count(body, "<tr data-id=") != 10 || !strings.Contains(body, `id="first-page"`) {
		t.Fatalf("second pending page: %d tasks, want 10\n%s", strings.Count(body, "<tr data-id="), body)
	}
	if _, body = b.get("/queue?queue=bulk&state=delayed"); strings.Count(body, "<tr data-id=") != 1 || !strings.Contains(body, `data-id="`+delayed+`"`) {
		t.Fatalf("delayed tab:\n%s", body)
	}
}
