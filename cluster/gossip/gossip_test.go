package gossip

import (
	"log/slog"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
)

func mustKey(t *testing.T) []byte {
	t.Helper()
	s, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKeys(s)
	if err != nil || len(k) != 1 {
		t.Fatalf("parse fresh key: %v %v", k, err)
	}
	return k[0]
}

func mustGossip(t *testing.T, id string, keys ...[]byte) *Gossip {
	t.Helper()
	g, err := New(Config{BindAddr: "127.0.0.1:0", Meta: Meta{ID: id, RaftAddr: "127.0.0.1:1"}, Keys: keys, Local: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { _ = g.Shutdown() }) // after the assertions
	return g
}

func status(g *Gossip, id string) Status {
	for _, m := range g.Members() {
		if m.ID == id {
			return m.Status
		}
	}
	return 0
}

// A member without the pool's key can neither join nor be seen: its join
// fails, and no member ever lists it.
func Test_RogueMemberWithoutKeyIsRefused(t *testing.T) {
	key := mustKey(t)
	a := mustGossip(t, "a", key)
	b := mustGossip(t, "b", key)
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatalf("b joins with the key: %v", err)
	}
	testwait.For(t, 5*time.Second, "a to see b", func() bool { return status(a, "b") == StatusAlive })

	rogue := mustGossip(t, "rogue") // plain
	if n, err := rogue.Join([]string{a.Addr()}); err == nil || n > 0 {
		t.Fatalf("plain rogue joined: n=%d err=%v", n, err)
	}
	other := mustGossip(t, "other", mustKey(t)) // a key, but the wrong one
	if n, err := other.Join([]string{a.Addr(), b.Addr()}); err == nil || n > 0 {
		t.Fatalf("wrong-key member joined: n=%d err=%v", n, err)
	}
	// Give gossip a few rounds to spread anything that slipped through.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, g := range []*Gossip{a, b} {
			if st := status(g, "rogue"); st != 0 {
				t.Fatalf("rogue is a member (%v)", st)
			}
			if st := status(g, "other"); st != 0 {
				t.Fatalf("wrong-key member is a member (%v)", st)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The documented rotation: install the new key everywhere, make it
// primary, remove the old one. The pool stays whole at every step, and a
// newcomer with only the new key joins at the end.
func Test_KeyRotationKeepsThePool(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	a := mustGossip(t, "a", oldKey)
	b := mustGossip(t, "b", oldKey)
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "a to see b", func() bool { return status(a, "b") == StatusAlive })
	steps := [][][]byte{{oldKey, newKey}, {newKey, oldKey}, {newKey}}
	for i, keys := range steps {
		for _, g := range []*Gossip{a, b} {
			if err := g.SetKeys(keys); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			// Between two nodes' reloads the pool must hold: probe rounds
			// run every 200 ms, so watch for a few of them.
			deadline := time.Now().Add(600 * time.Millisecond)
			for time.Now().Before(deadline) {
				if status(a, "b") != StatusAlive || status(b, "a") != StatusAlive {
					t.Fatalf("step %d: pool broke (a sees b %v, b sees a %v)", i, status(a, "b"), status(b, "a"))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	c := mustGossip(t, "c", newKey)
	if _, err := c.Join([]string{a.Addr()}); err != nil {
		t.Fatalf("newcomer with the new key: %v", err)
	}
	testwait.For(t, 5*time.Second, "b to see c", func() bool { return status(b, "c") == StatusAlive })
	stale := mustGossip(t, "stale", oldKey)
	if n, err := stale.Join([]string{a.Addr()}); err == nil || n > 0 {
		t.Fatalf("old key still admitted after removal: n=%d err=%v", n, err)
	}
	if err := a.SetKeys(nil); err == nil {
		t.Fatal("switching encryption off at run time was accepted")
	}
}

// Leave is told apart from a failure: the leader removes a leaver at once
// and a failed server only after a timeout.
func Test_LeaveIsNotFailure(t *testing.T) {
	a := mustGossip(t, "a")
	b := mustGossip(t, "b")
	c := mustGossip(t, "c")
	for _, g := range []*Gossip{b, c} {
		if _, err := g.Join([]string{a.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 5*time.Second, "a to see b and c", func() bool { return a.Alive() == 3 })
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = b.Shutdown()
	_ = c.Shutdown() // no leave: a crash or a restart
	testwait.For(t, 10*time.Second, "b left and c failed", func() bool {
		return status(a, "b") == StatusLeft && status(a, "c") == StatusFailed
	})
	a.Forget("c")
	if st := status(a, "c"); st != 0 {
		t.Fatalf("forgotten member still listed (%v)", st)
	}
	a.Forget("a")
	if status(a, "a") != StatusAlive {
		t.Fatal("Forget dropped an alive member")
	}
}

func Test_ParseKeys(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParseKeys("# rotation in progress\n\n" + k + "\n  " + k + "  \n")
	if err != nil || len(keys) != 2 || len(keys[0]) != KeySize {
		t.Fatalf("got %d keys, %v", len(keys), err)
	}
	for _, bad := range []string{"not base64!", "c2hvcnQ="} {
		if _, err := ParseKeys(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
