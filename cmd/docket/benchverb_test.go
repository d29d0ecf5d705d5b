package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// A refused `docket bench` says "usage" once, and is a usage error for
// the exit code.
func Test_BenchUsageSaysUsageOnce(t *testing.T) {
	err := runBench(context.Background(), []string{"--order", "lifo"}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Fatalf("runBench = %v, want errUsage", err)
	}
	if n := strings.Count(err.Error(), "usage"); n != 1 || !strings.Contains(err.Error(), `--order "lifo"`) {
		t.Fatalf("runBench = %q: want one \"usage\" and the refused flag", err)
	}
}
