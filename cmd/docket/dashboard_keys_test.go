package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// Test_DashboardQueueTopKeys: the Queue page of a fair queue shows its top
// keys by backlog and by running, the task rows and the Task page show a
// task's key, and an unkeyed queue's page shows no keys. It needs the
// FSM's fair-queue rules.
func Test_DashboardQueueTopKeys(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "the fair queues' level", func() bool {
		return f.nodes[0].node.FSM().EnabledLevel() >= fsm.LevelFairQueues
	})
	two, fair := uint32(2), client.OrderFair
	if _, err := f.admin.SetQueueLimits(ctx, "exports", "", client.QueueLimits{MaxRunningPerKey: &two, Order: &fair}); err != nil {
		t.Fatal(err)
	}
	var id string
	for range 4 {
		var err error
		if id, err = f.admin.EnqueueOne(ctx, "exports", []byte("x"), client.TaskKey("acme")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.admin.EnqueueOne(ctx, "plain", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.login(dashBoot)
	var body string
	testwait.For(t, 10*time.Second, "the top keys on the queue page", func() bool {
		_, body = b.get("/queue?queue=exports")
		return strings.Contains(body, `id="keys-backlog"`)
	})
	backlog := regexp.MustCompile(`(?s)<table id="keys-backlog".*?</table>`).FindString(body)
	if !regexp.MustCompile(`<td>acme</td><td class="n">4</td><td class="n">0</td><td class="n">2</td><td class="n">1</td>`).MatchString(backlog) ||
		!strings.Contains(body, `<span class="tag key" title="key">acme</span>`) {
		t.Fatalf("queue page's keys:\n%s", body)
	}
	if _, plain := b.get("/queue?queue=plain"); strings.Contains(plain, `id="keys-backlog"`) {
		t.Fatal("an unkeyed queue's page shows keys")
	}
	if _, task := b.get("/task?id=" + id); !strings.Contains(task, `<td id="key">acme</td>`) {
		t.Fatalf("task page:\n%s", task)
	}
}
