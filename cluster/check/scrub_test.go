package check_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// Bytes that change on disk under a running node were found only at its
// next start: its caches held the good copy, and the consistency check
// reads through them. The scrub reads the files themselves, so the node
// stops serving within one scrub period. The flip goes into a blob file
// (the 4 KiB bodies live there, storage/valsep.go): the table beside it
// holds little more than keys, and apply would read a flipped block of it
// before the scrub did.
func Test_ScrubFindsDamageWhileRunning(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.PebbleMemTableBytes = 64 << 10 // flush to tables after a few writes
	cfg.ScrubInterval = 100 * time.Millisecond
	// A compaction that read the damaged table first would stop the
	// process (Pebble's fatal report), as it does a real node.
	cfg.EditFSMOptions = func(o *fsm.Options) { o.NoCompactions = true }
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	// Write until Pebble holds a blob file; a scrub that reads one back
	// whole means its flush finished (a file being flushed may still be empty).
	scrubbed := func() int {
		st, err := n.FSM().Scrub(context.Background(), func(int64) error { return nil })
		if err != nil {
			t.Fatalf("scrub of a sound keyspace: %v", err)
		}
		return st.Blobs
	}
	for i := 0; i < 400 && scrubbed() == 0; i++ {
		nodetest.ProposeOK(t, n, strings.Repeat("x", 4<<10)+string(rune('a'+i%26)))
	}
	tables, _ := filepath.Glob(filepath.Join(cfg.DataDir, "fsm", "db", "*.blob"))
	if len(tables) == 0 {
		t.Fatal("the keyspace wrote no blob file")
	}
	if err := n.CheckErr(); err != nil {
		t.Fatalf("a sound node does not serve: %v", err)
	}
	b, err := os.ReadFile(tables[0])
	if err == nil && len(b) == 0 {
		t.Fatalf("table %s is empty", tables[0])
	}
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(tables[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the scrub to take the node out of service", func() bool {
		err := n.CheckErr()
		return errors.Is(err, check.ErrDiverged) && strings.Contains(err.Error(), "scrub")
	})
	if len(n.HealthProblems()) == 0 && n.CheckErr() == nil {
		t.Fatal("health says the damaged node can serve")
	}
}

// An entry of the Raft log that changes on disk under a running node was
// found only when Raft read it again (to replicate it to a lagging
// follower) or at the next start: raft-wal checks its frames only when it
// recovers the active segment's tail. The scrub reads every entry through
// its checksum after the tables, so the node reports the log fault within
// a scrub period.
func Test_ScrubFindsDamagedLogEntryWhileRunning(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.ScrubInterval = 100 * time.Millisecond
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	const marker = "scrub-me-0123456789"
	nodetest.ProposeOK(t, n, marker)
	for i := 0; i < 20; i++ {
		nodetest.ProposeOK(t, n, "after the marker")
	}
	segs, _ := filepath.Glob(filepath.Join(cfg.DataDir, "raft-wal", "*.wal"))
	flipped := false
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		at := strings.Index(string(b), marker)
		if at < 0 {
			continue
		}
		f, err := os.OpenFile(seg, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt([]byte{b[at+5] ^ 0x01}, int64(at+5))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		flipped = true
	}
	if !flipped {
		t.Fatalf("no raft-wal segment under %s holds the marker (segments %v)", cfg.DataDir, segs)
	}
	testwait.For(t, 10*time.Second, "the scrub to find the damaged log entry", func() bool {
		return errors.Is(n.LogFault(), raftlog.ErrRaftStoreCorrupt)
	})
}
