//go:build system

package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// Test_SystemCancelStopsWorker is the black-box check of
// cancelling running work: three agents of the built binary; a Go Worker
// in this process runs a handler that blocks until its ctx ends; the
// built binary's `docket cancel ID` stops that handler (cause
// ErrCancelRequested, through a heartbeat answer), and the task ends
// CANCELLED, never run again.
func Test_SystemCancelStopsWorker(t *testing.T) {
	ac := startAgentCluster(t, fsm.LevelCancelRunning)
	grpcs := ac.grpcs
	cli := func(args ...string) (string, error) { return ac.cli(grpcs, args...) }
	must := func(args ...string) string { t.Helper(); return ac.must(grpcs, args...) }

	id := strings.Fields(must("enqueue", "transcode", "movie.mkv", "--max-attempts", "5"))[0]
	c := mustClient(t, grpcs...)
	started, causes := blockingWorker(t, c, "transcode")
	if got := recv(t, started, "the handler to start"); got != id {
		t.Fatalf("handler got %s, want %s", got, id)
	}
	if out := must("cancel", id); !strings.HasPrefix(out, id+" cancel requested") {
		t.Fatalf("docket cancel of the running task printed %q", out)
	}
	if cause := recv(t, causes, "the handler's ctx to end"); !errors.Is(cause, client.ErrCancelRequested) {
		t.Fatalf("handler ctx cause %v, want ErrCancelRequested", cause)
	}
	testwait.For(t, 20*time.Second, "the task CANCELLED", func() bool {
		var task struct {
			State           string
			CancelRequested bool
		}
		out, err := cli("task", id, "--json")
		return err == nil && json.Unmarshal([]byte(out), &task) == nil &&
			task.State == "TASK_STATE_CANCELLED" && task.CancelRequested
	})
	select {
	case got := <-started:
		t.Fatalf("task %s ran again after it was cancelled", got)
	case <-time.After(time.Second):
	}
}
