package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_CLIDependencies: enqueue --after, dag enqueue of a file with local
// names, task and stats showing the wait, as the README tour runs them.
func Test_CLIDependencies(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	waitDepsLatched(t, nodes)
	addrs := strings.Join(addrsOf(nodes), ",")
	idOf := func(out string) string { return strings.Fields(out)[0] }

	root := idOf(docket(t, addrs, "enqueue", "etl", "root"))
	out := docket(t, addrs, "enqueue", "etl", "child", "--after", root, "--on-parent-failure", "run")
	if !strings.HasSuffix(strings.TrimSpace(out), "WAITING") {
		t.Fatalf("enqueue --after printed %q", out)
	}
	child := idOf(out)
	if s := docket(t, addrs, "task", child); !strings.Contains(s, "parents:   "+root+" (waiting on 1; if one fails: run)") {
		t.Fatalf("task printed %q", s)
	}
	if s := docket(t, addrs, "stats", "etl", "--json"); !strings.Contains(s, `"waiting":"1"`) {
		t.Fatalf("stats --json printed %q", s)
	}

	// A file out of order: load after transform after extract, and an
	// external parent; the verb sorts it and sends one Enqueue.
	dir := t.TempDir()
	file := filepath.Join(dir, "dag.json")
	writeFile(t, file, `{"queue": "etl", "tasks": [
		{"name": "load", "payload": "l", "after": ["transform"]},
		{"name": "transform", "payload": "t", "after": ["extract", "`+root+`"]},
		{"name": "extract", "payload": "e"}]}`)
	var got struct{ Tasks []dagEnqueued }
	if err := json.Unmarshal([]byte(docket(t, addrs, "dag", "enqueue", file, "--json")), &got); err != nil || len(got.Tasks) != 3 {
		t.Fatalf("dag enqueue --json: %+v %v", got, err)
	}
	byName := map[string]dagEnqueued{}
	for _, e := range got.Tasks {
		byName[e.Name] = e
	}
	if got.Tasks[0].Name != "extract" || byName["extract"].State != "PENDING" || byName["load"].State != "WAITING" {
		t.Fatalf("dag enqueue answered %+v", got.Tasks)
	}
	c := mustClient(t, addrs)
	ctx := testCtx(t)
	tr, err := c.ReadTask(ctx, byName["transform"].ID)
	if err != nil || strings.Join(tr.GetParents(), ",") != root+","+byName["extract"].ID {
		t.Fatalf("transform waits on %v (%v)", tr.GetParents(), err)
	}

	// A cycle is refused before anything is sent.
	writeFile(t, file, `{"queue": "etl", "tasks": [{"name": "a", "after": ["b"]}, {"name": "b", "after": ["a"]}]}`)
	var o, e bytes.Buffer
	err = run(ctx, []string{"dag", "enqueue", file, "--addr", addrs}, &o, &e)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cyclic file: %v", err)
	}
	// An unknown parent: nothing of the file is stored.
	writeFile(t, file, `{"queue": "etl", "tasks": [{"name": "a"}, {"name": "b", "after": ["a", "00000000000099990000"]}]}`)
	err = run(ctx, []string{"dag", "enqueue", file, "--addr", addrs}, &o, &e)
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("an unknown parent: %v", err)
	}
	if s := docket(t, addrs, "stats", "etl", "--json"); !strings.Contains(s, `"pending":"2"`) || !strings.Contains(s, `"waiting":"3"`) {
		t.Fatalf("stats after the refused file %q", s)
	}

	// Only the roots are claimable: root and extract.
	m := regexp.MustCompile(`(?m)^(\S+) fence=(\d+) `).FindAllStringSubmatch(docket(t, addrs, "claim", "etl", "--n", "10"), -1)
	if len(m) != 2 {
		t.Fatalf("claimed %v, want root and extract", m)
	}
}

// Test_WorkerReadsParentResults: a Worker's handler of a child reads its
// parents' results through Task.ParentResults.
func Test_WorkerReadsParentResults(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	waitDepsLatched(t, nodes)
	c := mustClient(t, addrsOf(nodes)...)
	ctx := testCtx(t)
	items, err := c.Enqueue(ctx, &pb.NewTask{Queue: "w", Payload: []byte("a")}, &pb.NewTask{Queue: "w", Payload: []byte("b")},
		&pb.NewTask{Queue: "w", Payload: []byte("sum"), AfterIndex: []uint32{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "w", PollWait: time.Second}, func(ctx context.Context, tk *client.Task) ([]byte, error) {
		if string(tk.Payload()) != "sum" {
			return []byte("r-" + string(tk.Payload())), nil
		}
		parents, err := tk.ParentResults(ctx)
		if err != nil {
			return nil, err
		}
		var rs []string
		for _, p := range parents {
			rs = append(rs, p.GetState().String()+"="+string(p.GetResult()))
		}
		mu.Lock()
		seen["sum"] = strings.Join(rs, ",")
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(ctx, w)
	defer stop()
	if _, err := c.WaitResult(ctx, items[2].GetTaskId()); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "TASK_STATE_COMPLETED=r-a,TASK_STATE_COMPLETED=r-b"; seen["sum"] != want {
		t.Fatalf("the child's handler read %q, want %q", seen["sum"], want)
	}
}

// Test_SharedEnqueueKeepsDAGsApart: concurrent callers whose Enqueues the
// client would share in one RPC each get their own graph: a child's
// after_index names its own caller's task, never a neighbour's.
func Test_SharedEnqueueKeepsDAGsApart(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	waitDepsLatched(t, nodes)
	c := mustClientWith(t, addrsOf(nodes), client.WithSharedRPCs(1))
	ctx := testCtx(t)
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			items, err := c.Enqueue(ctx, &pb.NewTask{Queue: "s", Payload: []byte{byte(i)}},
				&pb.NewTask{Queue: "s", AfterIndex: []uint32{0}})
			if err != nil {
				errs <- err
				return
			}
			child, err := c.ReadTask(ctx, items[1].GetTaskId())
			if err != nil {
				errs <- err
				return
			}
			if p := child.GetParents(); len(p) != 1 || p[0] != items[0].GetTaskId() {
				errs <- errors.New("caller's child waits on " + strings.Join(p, ",") + ", not on " + items[0].GetTaskId())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// waitDepsLatched waits until the cluster latched LevelDependencies: an
// Enqueue with parents is refused FEATURE_DISABLED before.
func waitDepsLatched(t *testing.T, nodes []*sysNode) {
	t.Helper()
	testwait.For(t, 20*time.Second, "the dependencies level to latch", func() bool {
		for _, n := range nodes {
			if n.node.FSM().EnabledLevel() < fsm.LevelDependencies {
				return false
			}
		}
		return true
	})
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
