package peer

import (
	"log/slog"
	"testing"
)

// Raft redials a refused peer many times a second; the refusal is logged
// once a minute per other cluster, and every refusal is still counted.
func Test_RefusalLoggedOncePerCluster(t *testing.T) {
	c := &Identity{id: func() string { return "mine" }, log: slog.New(slog.DiscardHandler)}
	if !c.shouldLog("a") || c.shouldLog("a") || !c.shouldLog("b") {
		t.Fatal("want the first refusal of each other cluster logged, and not the second")
	}
	for i := 0; i < 3; i++ {
		if err := c.Check("raft", "127.0.0.1:1", "a"); err == nil {
			t.Fatal("a peer of another cluster passed")
		}
	}
	if got := c.refused.Load(); got != 3 {
		t.Fatalf("refused %d, want 3", got)
	}
}
