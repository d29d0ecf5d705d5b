//go:build system

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// browserBinaries are the names Chromium goes by; .ci/run installs
// Debian's chromium.
var browserBinaries = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// artifactDir is where screenshots go: $DOCKET_ARTIFACTS, or a temp dir
// the test logs. DOCKET_SCREENSHOTS names a second directory to copy them
// into (the README's cmd/docket/dashboard/screenshots).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DOCKET_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// headless starts a headless Chromium for the test; it fails (never
// skips) when none is installed.
func headless(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range browserBinaries {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatalf("no Chromium found (tried %v): apt-get install chromium", browserBinaries)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1200, 760),
		chromedp.Flag("disable-gpu", true))
	// Chromium keeps its singleton lock in a directory of TMPDIR and leaves
	// it when killed, as chromedp ends it; this one is removed below.
	tmp, err := os.MkdirTemp("", "docket-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, chromedp.Env("TMPDIR="+tmp))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	before := chromiumDirs(t)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelT()
		cancel()
		cancelAlloc() // waits for the browser to exit
		// The browser's child processes may write into it for a moment
		// after the browser exited.
		testwait.Until(t, 5*time.Second, "the browser's directory removed", func() string {
			if err := os.RemoveAll(tmp); err != nil {
				return err.Error()
			}
			return ""
		})
		if after := chromiumDirs(t); after > before {
			t.Errorf("Chromium left %d directories in %s", after-before, os.TempDir())
		}
	})
	// The first call starts the browser and ties it to its context: this
	// one, not the shorter ones of the steps, whose end would close it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// chromiumDirs counts the directories Chromium keeps its singleton lock in
// (org.chromium.Chromium.*) in the machine's temporary directory; a browser
// that is killed, as chromedp ends it, leaves its own behind.
func chromiumDirs(t *testing.T) int {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(os.TempDir(), "org.chromium.Chromium.*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(left)
}

// step runs browser actions with a bound of their own.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := textOf(ctx, sel)
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// textOf is the text of sel, read again for up to 10 s while reading
// fails: a page that polls may swap the element between its lookup and its
// read ("No node with given id found").
func textOf(ctx context.Context, sel string) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil || sctx.Err() != nil {
			return strings.TrimSpace(s), err
		}
		select {
		case <-sctx.Done():
			return "", err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func shoot(t *testing.T, ctx context.Context, dirs []string, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	shot := chromedp.CaptureScreenshot()
	if name == "task" {
		shot = chromedp.FullScreenshot(100) // PNG; the attempts sit below the record
	}
	png, err := chromedp.Run(sctx, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Test_System_DashboardBrowser drives the dashboard of a real 3-node
// cluster with --auth in headless Chromium: login, the cluster, queues,
// task, live-lease and dead-letter pages render what the API holds, a
// requeue from the dead-letter page moves the task, and the cluster page
// shows the new leader after a leadership transfer without a reload.
func Test_System_DashboardBrowser(t *testing.T) {
	f := startDashboard(t, 3)
	ctx := ctxT(t, 3*time.Minute)
	dirs := []string{artifactDir(t)}
	if d := os.Getenv("DOCKET_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	// Attempts are recorded once the cluster latched their level.
	testwait.For(t, 30*time.Second, "the attempts level latched", func() bool {
		return f.nodes[0].node.FSM().EnabledLevel() >= fsm.LevelAttempts
	})
	pending, err := f.admin.EnqueueOne(ctx, "emails", []byte(`{"to":"ada@example.com"}`), client.TaskPriority(5))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := f.admin.EnqueueOne(ctx, "emails", []byte(`{"to":"bob@example.com"}`)); err != nil {
			t.Fatal(err)
		}
	}
	dead := f.deadLetter(ctx, "invoices", "default")
	if _, err := f.admin.EnqueueOne(ctx, "thumbnails", []byte("img-1")); err != nil {
		t.Fatal(err)
	}
	running, err := f.admin.Claim(ctx, &pb.ClaimRequest{Queue: "thumbnails", Tenant: "default", WorkerId: "worker-7", LeaseNs: int64(time.Minute), MaxTasks: 1})
	if err != nil || len(running) != 1 {
		t.Fatalf("claim: %v %v", running, err)
	}

	b := headless(t)
	step(t, b, "login", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), dashBoot), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#servers")))

	leader := waitLeader(t, f.nodes)
	if got := text(t, b, "#leader"); got != leader.id {
		t.Fatalf("cluster page shows leader %q, want %s", got, leader.id)
	}
	for _, n := range f.nodes {
		step(t, b, "row of "+n.id, chromedp.WaitVisible(chromedp.CSS(`#servers tr[data-id="`+n.id+`"]`)))
	}
	shoot(t, b, dirs, "cluster")

	// Two polls (2 s apart) give the sparklines their first segment.
	step(t, b, "queues page", chromedp.Navigate(f.url+"/queues"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="emails/default"]`)),
		chromedp.WaitReady(chromedp.CSS(`tr[data-key="emails/default"] svg.spark polyline`)))
	if got := text(t, b, `tr[data-key="emails/default"] td:nth-child(3)`); got != "4" {
		t.Fatalf("emails pending shown as %q, want 4", got)
	}
	// Enqueues while the page is open show in its counts and as a rate
	// above zero in the enqueue sparkline, without a reload.
	for i := range 10 {
		if _, err := f.admin.EnqueueOne(ctx, "emails", []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 15*time.Second, "the queues page to show 14 pending and an enqueue rate", func() bool {
		sctx, cancel := context.WithTimeout(b, 5*time.Second)
		defer cancel()
		got, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`(() => {
			const tr = document.querySelector('tr[data-key="emails/default"]');
			const svg = tr && tr.querySelector('svg[data-series="enq"]');
			return tr ? [tr.children[2].textContent.trim(), (svg && svg.dataset.peak) || "0"] : ["", "0"];
		})()`))
		if err != nil {
			t.Fatalf("read the queues page: %v", err)
		}
		peak, _ := strconv.ParseFloat(got[1], 64)
		return got[0] == "14" && peak > 0
	})
	shoot(t, b, dirs, "queues")

	step(t, b, "task page", chromedp.Navigate(f.url+"/task?id="+pending), chromedp.WaitVisible(chromedp.CSS("#state")))
	if got := text(t, b, "#state"); got != "pending" {
		t.Fatalf("task page shows state %q, want pending", got)
	}
	// The dead letter's page lists its one attempt, nacked by its worker.
	step(t, b, "task page with attempts", chromedp.Navigate(f.url+"/task?id="+dead),
		chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-claim="1"]`)))
	if got := text(t, b, `#attempts tr[data-claim="1"] td.outcome`); got != "nacked" {
		t.Fatalf("task page shows attempt 1 as %q, want nacked", got)
	}

	step(t, b, "leases page", chromedp.Navigate(f.url+"/leases"),
		chromedp.WaitVisible(chromedp.CSS(`table.leases tr[data-id="`+running[0].GetId()+`"]`)))
	if got := text(t, b, `table.leases tr[data-id="`+running[0].GetId()+`"] td:nth-child(2)`); got != "worker-7" {
		t.Fatalf("leases page shows worker %q, want worker-7", got)
	}
	shoot(t, b, dirs, "leases")

	// The running task's page counts its attempt as people do.
	step(t, b, "running task page", chromedp.Navigate(f.url+"/task?id="+running[0].GetId()),
		chromedp.WaitVisible(chromedp.CSS("#attempts-text")))
	if got := text(t, b, "#attempts-text"); got != "attempt 1 of 5" {
		t.Fatalf("running task's attempts read %q, want attempt 1 of 5", got)
	}
	shoot(t, b, dirs, "task")

	step(t, b, "dead-letter page", chromedp.Navigate(f.url+"/dead?queue=invoices"),
		chromedp.WaitVisible(chromedp.CSS(`table.dead tr[data-id="`+dead+`"]`)))
	shoot(t, b, dirs, "dead")
	step(t, b, "requeue", chromedp.Click(chromedp.CSS(`input[name="id"][value="`+dead+`"]`)),
		chromedp.Click(chromedp.CSS(".requeue-selected")), chromedp.WaitVisible(chromedp.CSS("#requeued")))
	if got := f.state(ctx, dead, "default"); got != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("after the requeue from the page the task is %v, want pending", got)
	}
	if got := text(t, b, "#requeued"); !strings.Contains(got, "Requeued 1") {
		t.Fatalf("flash after requeue: %q", got)
	}

	// The cluster page polls: the new leader appears without a reload.
	step(t, b, "cluster page", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS("#leader")))
	to := followers(f.nodes, leader)[0].id
	if _, err := f.admin.TransferLeadership(ctx, to); err != nil {
		t.Fatalf("transfer leadership to %s: %v", to, err)
	}
	testwait.For(t, 20*time.Second, "the page to show leader "+to, func() bool { return text(t, b, "#leader") == to })
	shoot(t, b, dirs, "cluster-after-transfer")
}
