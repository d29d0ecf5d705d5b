//go:build system

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// flashSays waits for the page's flash and checks that it says want.
func flashSays(t *testing.T, b context.Context, want string) {
	t.Helper()
	step(t, b, "the flash", chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := text(t, b, "#flash"); !strings.Contains(got, want) {
		t.Fatalf("flash %q, want it to say %q", got, want)
	}
}

// confirmed clicks a destructive action's button, checks that the
// confirmation page asks before anything happened (check), and confirms.
func confirmed(t *testing.T, b context.Context, button string, check func()) {
	t.Helper()
	step(t, b, "ask "+button, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS("#question")))
	check()
	step(t, b, "confirm "+button, chromedp.Click(chromedp.CSS("#confirm")))
}

// Test_System_DashboardActions drives every action of the dashboard in
// headless Chromium against a real 3-node cluster with --auth, one
// subtest per action, each checked through the API afterwards: pause,
// resume, purge, cancel, retry (run now), delete dead letters,
// reprioritise, requeue, and browsing a queue by state. It leaves the
// Queue page's screenshot beside the others.
func Test_System_DashboardActions(t *testing.T) {
	f := startDashboard(t, 3)
	ctx := ctxT(t, 3*time.Minute)
	dirs := []string{artifactDir(t)}
	if d := os.Getenv("DOCKET_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	testwait.For(t, 30*time.Second, "the retries level latched", func() bool {
		return f.nodes[0].node.FSM().EnabledLevel() >= fsm.LevelAttempts && f.nodes[0].node.FSM().EnabledLevel() >= 12
	})
	dead := f.deadLetter(ctx, "reports", "default")
	enqueue := func(queue string, opts ...client.TaskOption) string {
		t.Helper()
		id, err := f.admin.EnqueueOne(ctx, queue, []byte(`{"report":"weekly"}`), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for range 3 {
		enqueue("reports")
	}
	later := enqueue("reports", client.TaskDelay(time.Hour))
	b := headless(t)
	step(t, b, "login", chromedp.Navigate(f.url+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), dashBoot), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#servers")))
	queuePage := f.url + "/queue?queue=reports&tenant=default"

	t.Run("browse by state", func(t *testing.T) {
		step(t, b, "queues page", chromedp.Navigate(f.url+"/queues"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-key="reports/default"]`)))
		// The delayed count is a link to the delayed tab.
		step(t, b, "delayed count", chromedp.Click(chromedp.CSS(`tr[data-key="reports/default"] td:nth-child(4) a`)),
			chromedp.WaitVisible(chromedp.CSS(`#tasks[data-state="delayed"] tr[data-id="`+later+`"]`)))
		step(t, b, "pending tab", chromedp.Click(chromedp.CSS(`#states a[data-state="pending"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#tasks[data-state="pending"]`)))
		if got := text(t, b, `#states a[data-state="pending"] b`); got != "3" {
			t.Fatalf("pending tab counts %q, want 3", got)
		}
		shoot(t, b, dirs, "queue")
	})

	t.Run("pause", func(t *testing.T) {
		step(t, b, "queue page", chromedp.Navigate(queuePage), chromedp.Click(chromedp.CSS("#queue-actions .act-pause")))
		flashSays(t, b, "Paused reports")
		if !f.queueStats(ctx, "reports").GetPaused() {
			t.Fatal("not paused after the button")
		}
		step(t, b, "badge", chromedp.WaitVisible(chromedp.CSS("#paused")))
	})

	t.Run("resume", func(t *testing.T) {
		step(t, b, "queue page", chromedp.Navigate(queuePage), chromedp.Click(chromedp.CSS("#queue-actions .act-resume")))
		flashSays(t, b, "Resumed reports")
		if f.queueStats(ctx, "reports").GetPaused() {
			t.Fatal("paused after resume")
		}
	})

	t.Run("reprioritise", func(t *testing.T) {
		id := enqueue("reports")
		step(t, b, "task page", chromedp.Navigate(f.url+"/task?id="+id), chromedp.WaitVisible(chromedp.CSS("#task-actions input.prio")),
			chromedp.SetValue(chromedp.CSS("#task-actions input.prio"), "8"), chromedp.Click(chromedp.CSS("#task-actions .act-priority")))
		flashSays(t, b, "priority 8")
		if p := f.task(ctx, id).GetPriority(); p != 8 {
			t.Fatalf("priority %d, want 8", p)
		}
		if got := text(t, b, "#priority"); got != "8" {
			t.Fatalf("the page shows priority %q, want 8", got)
		}
	})

	t.Run("retry", func(t *testing.T) {
		step(t, b, "task page", chromedp.Navigate(f.url+"/task?id="+later), chromedp.Click(chromedp.CSS("#task-actions .act-retry")))
		flashSays(t, b, "runs now")
		if st := f.state(ctx, later, "default"); st != pb.TaskState_TASK_STATE_PENDING {
			t.Fatalf("after run now: %v, want pending", st)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		id := enqueue("reports")
		step(t, b, "task page", chromedp.Navigate(f.url+"/task?id="+id), chromedp.WaitVisible(chromedp.CSS("#task-actions")))
		confirmed(t, b, "#task-actions .act-cancel", func() {
			if st := f.state(ctx, id, "default"); st != pb.TaskState_TASK_STATE_PENDING {
				t.Fatalf("cancelled before the confirmation: %v", st)
			}
		})
		flashSays(t, b, "Cancelled "+id)
		if st := f.state(ctx, id, "default"); st != pb.TaskState_TASK_STATE_CANCELLED {
			t.Fatalf("after cancel: %v", st)
		}
		step(t, b, "cancelled state", chromedp.WaitVisible(chromedp.CSS("#state.cancelled")))
	})

	t.Run("requeue", func(t *testing.T) {
		step(t, b, "task page", chromedp.Navigate(f.url+"/task?id="+dead), chromedp.Click(chromedp.CSS("#task-actions .act-requeue")))
		flashSays(t, b, "Requeued "+dead)
		if st := f.state(ctx, dead, "default"); st != pb.TaskState_TASK_STATE_PENDING {
			t.Fatalf("after requeue: %v", st)
		}
	})

	t.Run("purge", func(t *testing.T) {
		step(t, b, "queue page", chromedp.Navigate(queuePage), chromedp.WaitVisible(chromedp.CSS("#queue-actions")))
		confirmed(t, b, "#queue-actions .act-purge", func() {
			if n := f.queueStats(ctx, "reports").GetPending(); n == 0 {
				t.Fatal("purged before the confirmation")
			}
		})
		flashSays(t, b, "deleted")
		if st := f.queueStats(ctx, "reports"); st.GetPending()+st.GetDelayed() != 0 {
			t.Fatalf("after purge: %d pending, %d delayed", st.GetPending(), st.GetDelayed())
		}
	})

	t.Run("delete dead letters", func(t *testing.T) {
		gone := f.deadLetter(ctx, "exports", "default")
		step(t, b, "dead page", chromedp.Navigate(f.url+"/dead"), chromedp.WaitVisible(chromedp.CSS(`table.dead tr[data-id="`+gone+`"]`)))
		confirmed(t, b, `form[action="/queue/purge-dead"] button`, func() {
			if st := f.state(ctx, gone, "default"); st != pb.TaskState_TASK_STATE_DEAD {
				t.Fatalf("deleted before the confirmation: %v", st)
			}
		})
		flashSays(t, b, "Deleted 1 dead letter of exports")
		if qs, err := f.admin.Stats(ctx, "exports", "default"); err != nil || len(qs) == 1 && qs[0].GetDead() != 0 {
			t.Fatalf("after delete: %v %v", qs, err)
		}
	})
}

// Test_System_DashboardLoginThroughFollower: in Chromium, on a follower's
// dashboard, a wrong token shows the login page saying "token not
// accepted", and the right one opens the Cluster page.
func Test_System_DashboardLoginThroughFollower(t *testing.T) {
	f := startDashboard(t, 3)
	leader := waitLeader(t, f.nodes)
	url := f.dashboardOn(followers(f.nodes, leader)[0])
	b := headless(t)
	step(t, b, "wrong token", chromedp.Navigate(url+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("p.err")))
	if got := text(t, b, "p.err"); !strings.Contains(got, "token not accepted") {
		t.Fatalf("login page says %q, want token not accepted", got)
	}
	step(t, b, "right token", chromedp.SendKeys(chromedp.CSS("#token"), dashBoot), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#servers")))
	if got := text(t, b, "#leader"); got != leader.id {
		t.Fatalf("cluster page through the follower shows leader %q, want %s", got, leader.id)
	}
}
