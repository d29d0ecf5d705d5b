package service

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// Test_MemGuard: no limit, no guard and no refusal; a limit below the
// process's use refuses with the numbers; one far above it does not.
func Test_MemGuard(t *testing.T) {
	off := newMemGuard(0, nil, slog.New(slog.DiscardHandler))
	if off != nil || off.check() != nil {
		t.Fatalf("no limit: guard %v, check %v", off, off.check())
	}
	low := newMemGuard(1<<20, nil, slog.New(slog.DiscardHandler))
	err := low.check()
	var mle *MemoryLimitError
	if !errors.Is(err, ErrMemoryLimit) || !errors.As(err, &mle) || mle.Use < mle.RefuseAt || !strings.Contains(err.Error(), "--memory-limit 1 MiB") {
		t.Fatalf("limit 1 MiB: %v", err)
	}
	if high := newMemGuard(1<<50, nil, slog.New(slog.DiscardHandler)); high.check() != nil {
		t.Fatalf("limit 1 PiB: %v", high.check())
	}
}

// BenchmarkMemorySample is one sample of the guard: what MemorySampleInterval
// pays, ten times a second.
func BenchmarkMemorySample(b *testing.B) {
	s := memSamples()
	for b.Loop() {
		readUse(s)
	}
}
