package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dockethq/docket/storage"
)

// Test_DiskFullStartExitCode: an agent that refuses to start on a full
// disk exits with its own code (6), so a supervisor can tell "free space"
// from a bad flag (2) or a crash (a Go panic is 2 too), and prints the
// refusal's one sentence, without the layers it was wrapped in.
func Test_DiskFullStartExitCode(t *testing.T) {
	full := &storage.DiskFullError{Dir: "/data/n1/fsm/db", Free: 8 << 20, Need: 68 << 20, Err: syscall.ENOSPC}
	err := fmt.Errorf("start node n1: open keyspace: %w", full)
	if got := exitCode(err); got != exitDiskFull {
		t.Fatalf("exit code of a full-disk start: %d, want %d", got, exitDiskFull)
	}
	line := describe(err)
	if line != full.Error() || strings.Contains(line, "\n") {
		t.Fatalf("full-disk start prints %q, want the refusal's one sentence %q", line, full.Error())
	}
	for _, c := range exitCodes {
		if c.code == exitDiskFull {
			return
		}
	}
	t.Fatalf("exit code %d is not in the -h list", exitDiskFull)
}
