package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/cmd/docket/dashboard"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// attemptRow finds the task page's row of claim n and returns it.
func attemptRow(t *testing.T, body string, claim uint32) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<tr data-claim="` + strconv.Itoa(int(claim)) + `".*?</tr>`)
	row := re.FindString(body)
	if row == "" {
		t.Fatalf("no row for attempt %d:\n%s", claim, body)
	}
	return row
}

// Test_DashboardTaskShowsAttempts: the Task page lists every attempt of a
// task with its worker, times, result and error, names the attempt that
// completed it, and shows ended attempts' fences to an admin only, the
// running one's to nobody.
func Test_DashboardTaskShowsAttempts(t *testing.T) {
	f := startDashboard(t, 1)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 10*time.Second, "the attempts level latched", func() bool {
		return f.nodes[0].node.FSM().EnabledLevel() >= 6
	})
	id, err := f.admin.EnqueueOne(ctx, "jobs", []byte("x"), client.TaskTenant("a"))
	if err != nil {
		t.Fatal(err)
	}
	claim := func(worker string) *pb.Task {
		t.Helper()
		tasks, err := f.admin.Claim(ctx, &pb.ClaimRequest{Queue: "jobs", Tenant: "a", WorkerId: worker, LeaseNs: int64(time.Minute), MaxTasks: 1})
		if err != nil || len(tasks) != 1 || tasks[0].GetId() != id {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		return tasks[0]
	}
	first := claim("w-one")
	if _, err := f.admin.Nack(ctx, &pb.NackRequest{TaskId: id, Fence: first.GetFence(), Tenant: "a", Reason: "disk <full>"}); err != nil {
		t.Fatal(err)
	}
	second := claim("w-two")

	admin, reader := f.browser(), f.browser()
	admin.login(dashBoot)
	reader.login(f.token(ctx, []string{pb.RoleReader}, []string{"a"}))
	page := func(b *browser) string {
		t.Helper()
		resp, body := b.get("/task?id=" + id + "&tenant=a")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("task page: %d\n%s", resp.StatusCode, body)
		}
		return body
	}
	body := page(admin)
	one, two := attemptRow(t, body, 1), attemptRow(t, body, 2)
	fenceCell := func(fence uint64) string { return `<td class="n fence">` + strconv.FormatUint(fence, 10) + `</td>` }
	for _, want := range []string{"w-one", "nacked", "disk &lt;full&gt;", fenceCell(first.GetFence())} {
		if !strings.Contains(one, want) {
			t.Errorf("admin's row of attempt 1 lacks %q:\n%s", want, one)
		}
	}
	if !strings.Contains(two, "w-two") || !strings.Contains(two, "running") || !strings.Contains(two, `<td class="n fence"></td>`) {
		t.Errorf("admin's row of the running attempt 2 (fence %d):\n%s", second.GetFence(), two)
	}
	if strings.Contains(page(reader), `class="n fence"`) {
		t.Errorf("a reader sees past fences:\n%s", page(reader))
	}

	if _, err := f.admin.Submit(ctx, &pb.SubmitRequest{TaskId: id, Fence: second.GetFence(), Tenant: "a", Outcome: pb.Outcome_OUTCOME_COMPLETED}); err != nil {
		t.Fatal(err)
	}
	body = page(admin)
	if !strings.Contains(body, `<p id="completed-by">Completed by attempt 2.</p>`) {
		t.Errorf("the page does not name the completing attempt:\n%s", body)
	}
	if two := attemptRow(t, body, 2); !strings.Contains(two, "won") || !strings.Contains(two, "completed") ||
		!strings.Contains(two, fenceCell(second.GetFence())) {
		t.Errorf("the completed attempt's row (an admin sees its ended fence):\n%s", two)
	}
}

// memAPI serves a MemNode (a real FSM and Service, apply without Raft)
// over gRPC on loopback, with auth off, and a dashboard of it.
func memAPI(t *testing.T) (*memnode.Node, string) {
	t.Helper()
	node, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node.SetLeaderAddr(lis.Addr().String())
	srv := transport.New(node, node.Service(), transport.Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	d, err := dashboard.New(dashboard.Config{GRPCAddr: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() {
		hs.Close()
		_ = d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = node.Close()
	})
	return node, hs.URL
}

// Test_DashboardLeasesHighlightOrphans: a claim whose answer went
// undelivered and whose release failed stays running; the Live leases
// page marks it orphaned, and not the task next to it.
func Test_DashboardLeasesHighlightOrphans(t *testing.T) {
	node, url := memAPI(t)
	ctx := ctxT(t, 30*time.Second)
	res, err := node.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{{Queue: "q", Tenant: "default"}, {Queue: "q", Tenant: "default"}}}}})
	if err != nil || len(res.GetItems()) != 2 {
		t.Fatalf("enqueue: %v %v", res, err)
	}
	tasks, err := node.Service().Claim(ctx, node.Service().ClaimCommand(&pb.ClaimRequest{Queue: "q", Tenant: "default", WorkerId: "w", MaxTasks: 2}), 0)
	if err != nil || len(tasks) != 2 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	lost, kept := tasks[0], tasks[1]
	node.Fail(errors.New("injected: the release is not proposed"))
	node.Service().ReleaseTasks([]*pb.Task{lost})
	b := &browser{t: t, base: url, c: &http.Client{Timeout: 10 * time.Second}}
	var body string
	testwait.For(t, 10*time.Second, "the failed release to leave the task running", func() bool {
		var resp *http.Response
		resp, body = b.get("/leases")
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `data-id="`+lost.GetId()+`"`) && node.Proposed(pb.CommandType_COMMAND_TYPE_RELEASE) == 0
	})
	row := func(id string) string {
		return regexp.MustCompile(`(?s)<tr data-id="` + id + `".*?</tr>`).FindString(body)
	}
	if r := row(lost.GetId()); !strings.Contains(r, "orphan") {
		t.Fatalf("the orphaned claim is not highlighted:\n%s", r)
	}
	if r := row(kept.GetId()); r == "" || strings.Contains(r, "orphan") {
		t.Fatalf("the delivered claim is shown as orphaned (or missing):\n%s", r)
	}
}
