package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_DashboardLoginThroughFollower: on a follower's dashboard a wrong
// token shows the login page with "token not accepted" (not an error
// about leadership), a valid one logs in, and a token revoked while its
// viewer is logged in sends the viewer to the login page, never a 502.
func Test_DashboardLoginThroughFollower(t *testing.T) {
	f := startDashboard(t, 3)
	ctx := ctxT(t, 60*time.Second)
	leader := waitLeader(t, f.nodes)
	follower := followers(f.nodes, leader)[0]
	b := f.browserAt(f.dashboardOn(follower))

	resp, body := b.post("/login", url.Values{"token": {"not-a-token"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "token not accepted") || !strings.Contains(body, `id="token"`) {
		t.Fatalf("wrong token on a follower: %d\n%s", resp.StatusCode, body)
	}
	tok, err := f.admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "viewer", Roles: []string{pb.RoleReader}, Tenants: []string{pb.AllTenants}})
	if err != nil {
		t.Fatal(err)
	}
	// Straight after its creation: the follower may not know it yet, the
	// leader does.
	b.login(tok.GetSecret())
	if resp, body := b.get("/queues"); resp.StatusCode != http.StatusOK {
		t.Fatalf("queues page on a follower: %d\n%s", resp.StatusCode, body)
	}
	if err := f.admin.RevokeToken(ctx, tok.GetAccessor()); err != nil {
		t.Fatal(err)
	}
	// Every node, not only this follower: a page's calls may reach any
	// of them, and a node authenticates on its own replica.
	testwait.For(t, 10*time.Second, "every node to apply the revoke", func() bool {
		for _, n := range f.nodes {
			if _, err := n.node.Service().Authenticate(tok.GetSecret()); err == nil {
				return false
			}
		}
		return true
	})
	for _, p := range []string{"/queues", "/queue?queue=x", "/dead", "/"} {
		resp, body := b.get(p)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("revoked token on a follower, GET %s: %d to %q, want 303 to /login\n%s", p, resp.StatusCode, resp.Header.Get("Location"), body)
		}
		b.c.Jar.SetCookies(mustURL(t, b.base), []*http.Cookie{{Name: "docket_token", Value: tok.GetSecret()}})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var tagRe = regexp.MustCompile(`<[^>]*>`)

// textOfPage is a page's text without its tags, spaces squeezed.
func textOfPage(body string) string {
	return strings.Join(strings.Fields(tagRe.ReplaceAllString(body, " ")), " ")
}

// Test_DashboardTaskWording: the Task page says "attempt 1 of 5" while
// the first claim runs, writes the lease in human units, says nothing of
// attempts left on a completed task, and shows a child's parents with
// their states, the parent's children, and a task's execution deadline.
func Test_DashboardTaskWording(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "the dependencies level", func() bool { return f.nodes[0].node.FSM().EnabledLevel() >= 11 })
	parent, err := f.admin.EnqueueOne(ctx, "dag", []byte("p"), client.TaskTimeout(20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	child, err := f.admin.EnqueueOne(ctx, "dag", []byte("c"), client.TaskAfter(parent))
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := f.admin.Claim(ctx, &pb.ClaimRequest{Queue: "dag", Tenant: "default", WorkerId: "w1", LeaseNs: int64(20 * time.Minute), MaxTasks: 1})
	if err != nil || len(claimed) != 1 || claimed[0].GetId() != parent {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	b := f.browser()
	b.login(dashBoot)
	_, body := b.get("/task?id=" + parent)
	text := textOfPage(body)
	for _, want := range []string{"attempts attempt 1 of 5", "lease 20m0s, until", "execution timeout 20m0s; deadline", "1 task were enqueued to wait on this one"} {
		if !strings.Contains(text, want) {
			t.Errorf("running parent's page lacks %q:\n%s", want, text)
		}
	}
	if regexp.MustCompile(`\d{3,}\.\ds`).MatchString(text) {
		t.Errorf("running parent's page writes seconds with decimals past a minute:\n%s", text)
	}
	_, body = b.get("/task?id=" + child)
	if !regexp.MustCompile(`(?s)<table id="parents">.*data-id="`+parent+`".*running`).MatchString(body) || !strings.Contains(body, "Waits on 1 of 1 parents") {
		t.Errorf("child's page does not show its running parent:\n%s", body)
	}
	if _, err := f.admin.Submit(ctx, &pb.SubmitRequest{TaskId: parent, Fence: claimed[0].GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}); err != nil {
		t.Fatal(err)
	}
	_, body = b.get("/task?id=" + parent)
	text = textOfPage(body)
	if !strings.Contains(text, "attempts finished after 1 claim") || strings.Contains(text, "ended without a submit") || strings.Contains(text, "allowed") {
		t.Errorf("completed task's attempts:\n%s", text)
	}
}

// Test_DashboardDeadLettersOfEveryQueue: without a queue named, the Dead
// letters page lists every queue's dead letters with their payload and
// the last claim's worker.
func Test_DashboardDeadLettersOfEveryQueue(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	one, two := f.deadLetter(ctx, "alpha", "default"), f.deadLetter(ctx, "beta", "default")
	b := f.browser()
	b.login(dashBoot)
	resp, body := b.get("/dead")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("dead page: %d\n%s", resp.StatusCode, body)
	}
	for _, id := range []string{one, two} {
		row := regexp.MustCompile(`(?s)<tr data-id="` + id + `">.*?</tr>`).FindString(body)
		if !strings.Contains(row, `<td class="worker">w</td>`) || !strings.Contains(row, `<pre class="payload">payload</pre>`) {
			t.Errorf("dead letter %s's row lacks its worker or payload:\n%s", id, row)
		}
	}
}

// Test_DashboardRatesKeptOnServer: the Queues page, opened after the
// dashboard sampled a while, draws its rate sparklines on its first
// render: the history is the server's, not the browser's.
func Test_DashboardRatesKeptOnServer(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "the totals level", func() bool { return f.nodes[0].node.FSM().EnabledLevel() >= 5 })
	b := f.browser()
	b.login(dashBoot) // the sampler needs a viewer's token
	if _, err := f.admin.EnqueueOne(ctx, "rated", []byte("x")); err != nil {
		t.Fatal(err)
	}
	peak := regexp.MustCompile(`data-series="enq" data-peak="([0-9.]+)"[^>]*><polyline points="`)
	testwait.For(t, 20*time.Second, "a drawn enqueue rate on a fresh page", func() bool {
		if _, err := f.admin.EnqueueOne(ctx, "rated", []byte("x")); err != nil {
			t.Fatal(err)
		}
		_, body := f.browserLoggedIn().get("/queues")
		i := strings.Index(body, `data-key="rated/default"`)
		if i < 0 {
			return false
		}
		m := peak.FindStringSubmatch(body[i:])
		return m != nil && m[1] != "0"
	})
}

// browserLoggedIn is a fresh viewer (no history of its own) logged in
// with the bootstrap token.
func (f *dashFixture) browserLoggedIn() *browser {
	b := f.browser()
	b.login(dashBoot)
	return b
}

// Test_DashboardDownNodeSentence: the Cluster page writes a stopped
// server's row as a sentence, not a raw gRPC error.
func Test_DashboardDownNodeSentence(t *testing.T) {
	f := startDashboard(t, 3)
	leader := waitLeader(t, f.nodes)
	var down *sysNode
	for _, n := range followers(f.nodes, leader) {
		if n != f.nodes[0] {
			down = n
		}
	}
	down.stop()
	b := f.browser()
	b.login(dashBoot)
	var row string
	testwait.For(t, 20*time.Second, "the page to show "+down.id+" down", func() bool {
		_, body := b.get("/")
		row = regexp.MustCompile(`(?s)<tr data-id="` + down.id + `".*?</tr>`).FindString(body)
		return strings.Contains(row, `class="err"`)
	})
	if !strings.Contains(row, "The node does not answer") || strings.Contains(row, "rpc error") || strings.Contains(row, "desc =") {
		t.Fatalf("down server's row:\n%s", row)
	}
}

// Test_DashboardQueueSchedules: the Queue page lists the schedules that
// enqueue into it with their next run.
func Test_DashboardQueueSchedules(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "the schedules level", func() bool { return f.nodes[0].node.FSM().EnabledLevel() >= 8 })
	for _, sc := range []*pb.Schedule{{Name: "nightly", Queue: "reports", Spec: "0 3 * * *"}, {Name: "other", Queue: "elsewhere", Spec: "*/5 * * * *"}} {
		if _, _, err := f.admin.PutSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	b := f.browser()
	b.login(dashBoot)
	var body string
	testwait.For(t, 10*time.Second, "the schedule on the queue page", func() bool {
		_, body = b.get("/queue?queue=reports")
		return strings.Contains(body, `data-name="nightly"`)
	})
	row := regexp.MustCompile(`(?s)<tr data-name="nightly">.*?</tr>`).FindString(body)
	if !regexp.MustCompile(`class="next">\d{4}-\d\d-\d\d 03:00:00\.000Z \(in `).MatchString(row) || strings.Contains(body, `data-name="other"`) {
		t.Fatalf("queue page's schedules:\n%s", body)
	}
}

// Test_DashboardFindTaskInTheViewersTenant: the header's search box names
// no tenant; a viewer of tenant a finds a's task by its id alone, and an
// id of a tenant it does not see stays not found.
func Test_DashboardFindTaskInTheViewersTenant(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	aID, err := f.admin.EnqueueOne(ctx, "qa", []byte("x"), client.TaskTenant("a"))
	if err != nil {
		t.Fatal(err)
	}
	bID, err := f.admin.EnqueueOne(ctx, "qb", []byte("y"), client.TaskTenant("b"))
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.login(f.token(ctx, []string{pb.RoleReader}, []string{"a"}))
	if resp, body := b.get("/task?id=" + aID); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="state">pending<`) {
		t.Fatalf("own task by id alone: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := b.get("/task?id=" + bID); resp.StatusCode == http.StatusOK || strings.Contains(body, "qb") {
		t.Fatalf("tenant b's task by id alone: %d\n%s", resp.StatusCode, body)
	}
}
