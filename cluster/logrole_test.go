package cluster_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// Test_LogLinesCarryTermAndLeader is the "add the leader and term
// to each line": a node's lines, Raft's own included, name the term and
// the leader it knows at the moment they are written.
func Test_LogLinesCarryTermAndLeader(t *testing.T) {
	buf := &lockedBuffer{}
	cfg := nodetest.Config(t, "n1", 1)
	cfg.Logger = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "a line naming the leader and its term", func() bool {
		for _, line := range buf.lines() {
			var rec struct {
				Node, Leader string
				Term         uint64
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Node == "n1" && rec.Leader == "n1" && rec.Term >= 1 && rec.Term == n.Internals().Raft.CurrentTerm() {
				return true
			}
		}
		return false
	})
}
