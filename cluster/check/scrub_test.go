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
