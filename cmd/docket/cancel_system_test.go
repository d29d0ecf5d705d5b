//go:build system

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
)

// Test_SystemCancelStopsWorker is issue 14's black-box check of
// cancelling running work: three agents of the built binary; a Go Worker
// in this process runs a handler that blocks until its ctx ends; the
// built binary's `docket cancel ID` stops that handler (cause
// ErrCancelRequested, through a heartbeat answer), and the task ends
// CANCELLED, never run again.
func Test_SystemCancelStopsWorker(t *testing.T) {
	bin := buildDocket(t)
	dir := t.TempDir()
	var grpcs, gossips []string
	for i := 0; i < 3; i++ {
		grpcs, gossips = append(grpcs, freeAddr(t)), append(gossips, freeAddr(t))
	}
	for i := range grpcs {
		id := fmt.Sprintf("n%d", i+1)
		startLimitedAgent(t, bin, 4096, filepath.Join(dir, id+".log"),
			"agent", "--id", id, "--data-dir", filepath.Join(dir, id), "--grpc-addr", grpcs[i],
			"--raft-addr", freeAddr(t), "--gossip-addr", gossips[i], "--gossip-local",
			"--bootstrap-expect", "3", "--join", strings.Join(gossips, ","))
	}
	cli := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		full := append([]string{args[0], "--addr", strings.Join(grpcs, ","), "--timeout", "20s"}, args[1:]...)
		out, err := exec.CommandContext(ctx, bin, full...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := cli(args...)
		if err != nil {
			t.Fatalf("docket %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	waitFor(t, 60*time.Second, "a leader with level 9 latched", func() bool {
		var st struct {
			LeaderID            string `json:"leaderId"`
			EnabledFeatureLevel uint32 `json:"enabledFeatureLevel"`
		}
		out, err := cli("cluster", "status", "--json")
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.LeaderID != "" && st.EnabledFeatureLevel >= fsm.LevelCancelRunning
	})

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
	waitFor(t, 20*time.Second, "the task CANCELLED", func() bool {
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
