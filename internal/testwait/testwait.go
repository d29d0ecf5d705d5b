// Package testwait is the one poll-until helper of the project's tests: a
// test waits for a state by polling a condition under a deadline, never by
// sleeping. It imports nothing of the project, so every package's tests
// may use it.
package testwait

import (
	"testing"
	"time"
)

// Interval is how often For polls its condition.
const Interval = 5 * time.Millisecond

// For polls cond every Interval until it holds, and fails the test naming
// what it waited for when d passes first. cond runs on the test's
// goroutine, so it may call t.Fatal.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(Interval)
	}
}

// Until is For for a condition that can say why it does not hold yet:
// cond returns "" once it holds, or the reason it does not, and the
// failure names the last reason when d passes first.
func Until(t testing.TB, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for why := cond(); why != ""; why = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", d, what, why)
		}
		time.Sleep(Interval)
	}
}
