package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cmd/docket/dashboard"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// dashFixture is a real node with --auth, its admin client, and a
// dashboard of it served by httptest.
type dashFixture struct {
	t     *testing.T
	nodes []*sysNode
	admin *client.Client
	url   string
	// reg holds the metrics of the dashboard at url.
	reg *prometheus.Registry
}

const dashBoot = "bootstrap-secret-for-the-dashboard"

func startDashboard(t *testing.T, size int) *dashFixture {
	t.Helper()
	nodes := startClusterAPI(t, size, func(c *cluster.Config) { c.BootstrapSecret = dashBoot }, transport.Config{Auth: true})
	// The bootstrap token is applied through the log after the election.
	for _, n := range nodes {
		testwait.For(t, 10*time.Second, n.id+" to know the bootstrap token", func() bool {
			_, err := n.node.Service().Authenticate(dashBoot)
			return err == nil
		})
	}
	admin := mustClientWith(t, addrsOf(nodes), client.WithToken(dashBoot))
	f := &dashFixture{t: t, nodes: nodes, admin: admin, reg: prometheus.NewRegistry()}
	f.url = f.dashboardOnWith(nodes[0], f.reg)
	return f
}

// dashboardOn serves a dashboard of node n (with --auth) and returns its
// URL.
func (f *dashFixture) dashboardOn(n *sysNode) string {
	f.t.Helper()
	return f.dashboardOnWith(n, nil)
}

// dashboardOnWith is dashboardOn whose metrics go to reg (nil: none).
func (f *dashFixture) dashboardOnWith(n *sysNode, reg prometheus.Registerer) string {
	f.t.Helper()
	d, err := dashboard.New(dashboard.Config{GRPCAddr: n.grpcAddr, Auth: true, Registerer: reg})
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	f.t.Cleanup(func() {
		srv.Close()
		if err := d.Close(); err != nil {
			f.t.Errorf("close dashboard: %v", err)
		}
	})
	return srv.URL
}

// token mints a token with roles over tenants, once the bootstrap token is
// known to the leader.
func (f *dashFixture) token(ctx context.Context, roles, tenants []string) string {
	f.t.Helper()
	var tok *pb.CreateTokenResponse
	testwait.For(f.t, 10*time.Second, "a token", func() bool {
		var err error
		tok, err = f.admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "dash", Roles: roles, Tenants: tenants})
		return err == nil
	})
	// The dashboard checks tokens on node 0's replica.
	testwait.For(f.t, 10*time.Second, "node 0 to know the token", func() bool {
		_, err := f.nodes[0].node.Service().Authenticate(tok.GetSecret())
		return err == nil
	})
	return tok.GetSecret()
}

// deadLetter enqueues a task with one attempt into queue/tenant, claims
// and nacks it, so it is dead.
func (f *dashFixture) deadLetter(ctx context.Context, queue, tenant string) string {
	f.t.Helper()
	id, err := f.admin.EnqueueOne(ctx, queue, []byte("payload"), client.TaskTenant(tenant), client.TaskMaxAttempts(1))
	if err != nil {
		f.t.Fatalf("enqueue: %v", err)
	}
	tasks, err := f.admin.Claim(ctx, &pb.ClaimRequest{Queue: queue, Tenant: tenant, WorkerId: "w", LeaseNs: int64(time.Minute), MaxTasks: 1})
	if err != nil || len(tasks) != 1 || tasks[0].GetId() != id {
		f.f("claim %s: %v %v", id, tasks, err)
	}
	if _, err := f.admin.Nack(ctx, &pb.NackRequest{TaskId: id, Fence: tasks[0].GetFence(), Tenant: tenant, Reason: "broken"}); err != nil {
		f.f("nack: %v", err)
	}
	if st := f.state(ctx, id, tenant); st != pb.TaskState_TASK_STATE_DEAD {
		f.f("task %s is %v, want dead", id, st)
	}
	return id
}

func (f *dashFixture) f(format string, args ...any) { f.t.Helper(); f.t.Fatalf(format, args...) }

func (f *dashFixture) state(ctx context.Context, id, tenant string) pb.TaskState {
	f.t.Helper()
	c := metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+dashBoot)
	resp, err := rawQueue(f.t, f.nodes[0].grpcAddr).GetTask(c, &pb.GetTaskRequest{TaskId: id, Tenant: tenant})
	if err != nil {
		f.f("get %s: %v", id, err)
	}
	return resp.GetTask().GetState()
}

// browser is one viewer: a cookie jar, redirects not followed so that a
// test sees them.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (f *dashFixture) browser() *browser { return f.browserAt(f.url) }

// browserAt is a viewer of the dashboard at base.
func (f *dashFixture) browserAt(base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return &browser{t: f.t, base: base, c: &http.Client{Jar: jar, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: read: %v", req.Method, req.URL, err)
	}
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (b *browser) login(secret string) {
	b.t.Helper()
	resp, body := b.post("/login", url.Values{"token": {secret}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		b.t.Fatalf("login: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the form token of a page the viewer can render.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	_, body := b.get(path)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("%s has no form token", path)
	}
	return m[1]
}

// Test_DashboardLoginRequired: with --auth every page sends a viewer
// without a token to the login page, a token the node does not know is
// refused, and a known one is kept in an HttpOnly, SameSite=Strict cookie
// that opens the pages.
func Test_DashboardLoginRequired(t *testing.T) {
	f := startDashboard(t, 1)
	b := f.browser()
	for _, p := range []string{"/", "/queues", "/task?id=x", "/dead?queue=q", "/leases"} {
		resp, _ := b.get(p)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("GET %s without a token: %d to %q, want 303 to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := b.post("/login", url.Values{"token": {"not-a-token"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("login with an unknown token: %d, want 401", resp.StatusCode)
	}
	// A cookie the viewer made up is no better than none.
	u, _ := url.Parse(f.url)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: dashboard.CookieName, Value: "forged"}})
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET / with a forged cookie: %d, want 303", resp.StatusCode)
	}
	resp, _ := b.post("/login", url.Values{"token": {dashBoot}})
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == dashboard.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != dashBoot {
		t.Fatalf("login cookie: %+v", cookie)
	}
	resp, body := b.get("/")
	leader := waitLeader(t, f.nodes)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<b id="leader">`+leader.id+`</b>`) {
		t.Fatalf("cluster page after login: %d, leader %s not shown:\n%s", resp.StatusCode, leader.id, body)
	}
}

// Test_DashboardTenantScoped: a token of tenant a sees a's queues only,
// and another tenant's task is refused or not found, as the API says.
func Test_DashboardTenantScoped(t *testing.T) {
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
	resp, body := b.get("/queues")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-key="qa/a"`) || strings.Contains(body, "qb") {
		t.Fatalf("queues page of tenant a's reader: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := b.get("/task?id=" + aID + "&tenant=a"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="state">pending<`) {
		t.Fatalf("own task: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.get("/task?id=" + bID + "&tenant=b"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tenant b's task named with tenant b: %d, want 403", resp.StatusCode)
	}
	if resp, body := b.get("/task?id=" + bID + "&tenant=a"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "qb") {
		t.Fatalf("tenant b's task named with tenant a: %d, want 404\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.get("/leases?queue=qb&tenant=b"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tenant b's leases: %d, want 403", resp.StatusCode)
	}
}

// Test_DashboardShowsPausedQueue: a paused queue carries a "paused" badge
// on the queues page; the others do not.
func Test_DashboardShowsPausedQueue(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	for _, q := range []string{"qp", "qr"} {
		if _, err := f.admin.EnqueueOne(ctx, q, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// The cluster latches the queue control level shortly after it starts.
	testwait.For(t, 30*time.Second, "a pause the cluster accepts", func() bool {
		_, err := f.admin.PauseQueue(ctx, "qp", "")
		if err != nil && !errors.Is(err, client.ErrFeatureDisabled) {
			t.Fatalf("pause: %v", err)
		}
		return err == nil
	})
	b := f.browser()
	b.login(f.token(ctx, []string{pb.RoleReader}, []string{"*"}))
	resp, body := b.get("/queues")
	row := func(key string) string {
		i := strings.Index(body, `data-key="`+key+`"`)
		if i < 0 {
			t.Fatalf("no row %s:\n%s", key, body)
		}
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(row("qp/default"), ">paused<") || strings.Contains(row("qr/default"), ">paused<") {
		t.Fatalf("queues page: %d\n%s", resp.StatusCode, body)
	}
}

// Test_DashboardRequeueNeedsAdminAndFormToken: a requeue POST without the
// form token, or from a token without the admin role, is refused and
// leaves the task dead; an admin's with the token moves it.
func Test_DashboardRequeueNeedsAdminAndFormToken(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	id := f.deadLetter(ctx, "jobs", "default")
	form := func(csrf string) url.Values {
		v := url.Values{"queue": {"jobs"}, "tenant": {"default"}, "id": {id}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}

	reader := f.browser()
	reader.login(f.token(ctx, []string{pb.RoleReader}, []string{pb.AllTenants}))
	// A reader sees the dead letters (ListTasks), without the controls.
	if resp, body := reader.get("/dead?queue=jobs"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-id="`+id+`"`) ||
		strings.Contains(body, `type="checkbox" name="id"`) || strings.Contains(body, "requeue-selected") {
		t.Fatalf("reader's dead-letter page: %d, want the task without checkboxes or buttons\n%s", resp.StatusCode, body)
	}
	if resp, body := reader.post("/dead/requeue", form(reader.csrf("/queues"))); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("reader requeues: %d, want 403\n%s", resp.StatusCode, body)
	}
	admin := f.browser()
	admin.login(dashBoot)
	if resp, _ := admin.post("/dead/requeue", form("")); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("requeue without a form token: %d, want 403", resp.StatusCode)
	}
	// A form token is bound to the token it was rendered for.
	if resp, _ := admin.post("/dead/requeue", form(reader.csrf("/queues"))); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("requeue with another viewer's form token: %d, want 403", resp.StatusCode)
	}
	if st := f.state(ctx, id, "default"); st != pb.TaskState_TASK_STATE_DEAD {
		t.Fatalf("after refused requeues the task is %v, want dead", st)
	}
	resp, body := admin.post("/dead/requeue", form(admin.csrf("/dead?queue=jobs")))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin requeue: %d\n%s", resp.StatusCode, body)
	}
	if st := f.state(ctx, id, "default"); st != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("after the admin's requeue the task is %v, want pending", st)
	}
	if _, body := admin.get(resp.Header.Get("Location")); !strings.Contains(body, "Requeued 1") {
		t.Fatalf("the page after a requeue does not say so:\n%s", body)
	}
}

// Test_ListTasksHidesFencesAndTenants: ListTasks (the Live leases page's
// source) answers a reader with the running task and no fence, and
// refuses another tenant's queue.
func Test_ListTasksHidesFencesAndTenants(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	id, err := f.admin.EnqueueOne(ctx, "work", []byte("x"), client.TaskTenant("a"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := f.admin.Claim(ctx, &pb.ClaimRequest{Queue: "work", Tenant: "a", WorkerId: "w1", LeaseNs: int64(time.Minute), MaxTasks: 1})
	if err != nil || len(tasks) != 1 || tasks[0].GetFence() == 0 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	secret := f.token(ctx, []string{pb.RoleReader}, []string{"a"})
	c := metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret)
	q := rawQueue(t, f.nodes[0].grpcAddr)
	resp, err := q.ListTasks(c, &pb.ListTasksRequest{Queue: "work", Tenant: "a", State: pb.TaskState_TASK_STATE_RUNNING})
	if err != nil || len(resp.GetTasks()) != 1 || resp.GetTasks()[0].GetId() != id {
		t.Fatalf("list running: %v %v", resp, err)
	}
	if got := resp.GetTasks()[0]; got.GetFence() != 0 || got.GetWorkerId() != "w1" {
		t.Fatalf("listed task: fence %d worker %q, want no fence and w1", got.GetFence(), got.GetWorkerId())
	}
	if _, err := q.ListTasks(c, &pb.ListTasksRequest{Queue: "work", Tenant: "b", State: pb.TaskState_TASK_STATE_RUNNING}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another tenant's listing: %v, want PermissionDenied", err)
	}
	if _, err := q.ListTasks(c, &pb.ListTasksRequest{Queue: "work", Tenant: "a", State: pb.TaskState_TASK_STATE_COMPLETED}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a state without an index: %v, want InvalidArgument", err)
	}
	b := f.browser()
	b.login(secret)
	if resp, body := b.get("/leases"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-id="`+id+`"`) || !strings.Contains(body, "w1") {
		t.Fatalf("leases page: %d\n%s", resp.StatusCode, body)
	}
}

// Test_AgentHTTPAddrBeyondLoopback: a non-loopback --http-addr is refused
// at start unless the agent runs both TLS and --auth, as --debug-addr is;
// a --grpc-addr the dashboard cannot dial is refused too.
func Test_AgentHTTPAddrBeyondLoopback(t *testing.T) {
	for name, extra := range map[string][]string{"plain": nil, "auth only": {"--auth"}} {
		args := append([]string{"agent", "--id", "x", "--data-dir", t.TempDir(), "--http-addr", "10.1.2.3:7800"}, extra...)
		if err := run(testCtx(t), args, io.Discard, io.Discard); !errors.Is(err, errHTTPNotLoopback) || !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want errHTTPNotLoopback", name, err)
		}
	}
	if err := checkHTTPAddr("10.1.2.3:7800", true); err != nil {
		t.Errorf("TLS and --auth on: %v", err)
	}
	if _, err := dashboardTarget("127.0.0.1:0"); !errors.Is(err, errUsage) {
		t.Errorf("--grpc-addr port 0: %v, want a usage error", err)
	}
	if got, err := dashboardTarget("0.0.0.0:7401"); err != nil || got != "127.0.0.1:7401" {
		t.Errorf("wildcard --grpc-addr: %q %v, want 127.0.0.1:7401", got, err)
	}
}

// Test_AgentServesOpenDashboard: an agent without --auth serves the
// dashboard in plain HTTP on loopback, open, and says so on the page.
func Test_AgentServesOpenDashboard(t *testing.T) {
	dir := t.TempDir()
	httpAddr := testaddr.Free(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--bootstrap-expect", "1",
			"--grpc-addr", testaddr.Free(t), "--raft-addr", testaddr.Free(t), "--ballast-size", "0", "--log-level", "warn",
			"--http-addr", httpAddr}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second}
	var body string
	testwait.For(t, 20*time.Second, "the dashboard to show a leader", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("agent ended: %v", err)
		default:
		}
		resp, err := hc.Get("http://" + httpAddr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `<b id="leader">n1</b>`)
	})
	if !strings.Contains(body, "open: no login") {
		t.Fatalf("an open dashboard does not say so:\n%s", body)
	}
}
