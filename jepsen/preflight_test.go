package jepsen

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dockethq/docket/fsm"
)

// pathWithout builds a PATH directory holding links to the given commands
// only.
func pathWithout(t *testing.T, keep ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range keep {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Skipf("%s not installed here", c) // the tool under test is the one left out
		}
		if err := os.Symlink(p, filepath.Join(dir, c)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The machine had iproute2 but no iptables. A run that needs
// iptables must refuse at once, naming the package, for any user: the
// root check must not come first and hide it. Runs with or without root.
func TestRunWithoutIptablesRefusesNamingThePackage(t *testing.T) {
	t.Setenv("PATH", pathWithout(t, "ip", "umount"))
	cfg := RunConfig{Name: "t", Nodes: 3, Faults: []string{FaultHalves, FaultKill}, Bin: "/nonexistent/docket",
		ReportDir: t.TempDir(), Seed: 1}
	_, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("a run without iptables started")
	}
	msg := err.Error()
	if !strings.Contains(msg, "iptables (package iptables)") || !strings.Contains(msg, "apt-get install -y iptables") {
		t.Fatalf("refusal does not name the package: %v", err)
	}
	if strings.Contains(msg, "root") {
		t.Fatalf("the root check hid the missing tool: %v", err)
	}
}

func TestCheckToolsNamesEveryMissingPackage(t *testing.T) {
	onlyUmount, base := pathWithout(t, "umount"), pathWithout(t, "ip", "umount")
	t.Setenv("PATH", onlyUmount)
	err := CheckTools([]string{FaultLoss, FaultLostData})
	if !errors.Is(err, ErrMissingTool) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"ip (package iproute2)", "iptables (package iptables)", "mkfs.ext4 (package e2fsprogs)", "apt-get install -y coreutils e2fsprogs iproute2 iptables mount"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in: %v", want, err)
		}
	}
	// kill and pause need nothing beyond the base tools.
	t.Setenv("PATH", base)
	if err := CheckTools([]string{FaultKill, FaultPause, FaultClock, FaultCorrupt}); err != nil {
		t.Fatalf("signal faults need no extra tool: %v", err)
	}
	if err := CheckTools([]string{"flood"}); err == nil || !strings.Contains(err.Error(), "unknown fault") {
		t.Fatalf("unknown fault accepted: %v", err)
	}
}

// With every tool present, a non-root user gets a clear refusal.
func TestPreflightNeedsRootAfterTools(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	if err := Preflight(context.Background(), []string{FaultKill}); !errors.Is(err, ErrNeedsRoot) {
		t.Fatalf("err %v", err)
	}
}

// The corruption fault must find Pebble's files where a node keeps them
// (data/fsm/db): a real FSM's directory, not a guess.
func TestCorruptCandidatesFindPebbleFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := fsm.Open(filepath.Join(dir, "fsm"), fsm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	// An idle FSM has an empty WAL and no table yet: stand-ins by name.
	for _, n := range []string{"000009.log", "000010.sst", "000011.blob"} {
		if err := os.WriteFile(filepath.Join(dir, "fsm", "db", n), make([]byte, 64), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// raft-wal's files, by the names it gives them (cluster/raftlog).
	if err := os.MkdirAll(filepath.Join(dir, "raft-wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"00000000000000000001-0000000000000000.wal", "wal-meta.db"} {
		if err := os.WriteFile(filepath.Join(dir, "raft-wal", n), make([]byte, 64), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := corruptCandidates(dir)
	for _, k := range []string{KindRaftDB, KindManifest, KindWAL, KindSST, KindBlob, KindWALSegment, KindWALMeta} {
		if len(c[k]) == 0 {
			t.Fatalf("no %s found: %v", k, c)
		}
	}
	p := c[KindManifest][0]
	before, _ := os.ReadFile(p)
	offs, err := flipBytes(p, rand.New(rand.NewPCG(1, 2)), 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(p)
	for _, o := range offs {
		if before[o] == after[o] || before[o+7] != ^after[o+7] {
			t.Fatalf("bytes at %d not inverted", o)
		}
	}
}

// A raft-wal segment is preallocated and zero past its last append: the
// fault flips bytes only where entries were written, or it would damage
// nothing anything reads.
func TestCorruptSegmentFlipsLandInWrittenBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000001-0000000000000000.wal")
	b := make([]byte, 3<<20) // past the first MiB read backwards
	for i := range 5000 {
		b[i] = byte(i%251 + 1)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ext := writtenExtent(p)
	if ext != 5000 {
		t.Fatalf("written extent %d, want 5000", ext)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		offs, err := flipBytesIn(p, r, 4, 8, ext)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range offs {
			if o+8 > ext {
				t.Fatalf("flip at %d reaches past the written %d bytes", o, ext)
			}
		}
	}
}
