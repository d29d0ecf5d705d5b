package fsm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// pacedViews builds a keyspace of several hash chunks and returns a func
// that applies a Check entry and gives its view with the keyspace's hash
// at that entry, as FSM.Hash answers it.
func pacedViews(t *testing.T) func() (*CheckView, string) {
	t.Helper()
	h := newHarness(t)
	body := make([]byte, 4096)
	for i := 0; i < 800; i++ { // about 3.3 MB of payloads: four chunks
		task := nt("q", "t", 1)
		task.Payload = append([]byte(fmt.Sprintf("%04d", i)), body...)
		h.enqueue(at(time.Duration(i)), task)
	}
	views := make(chan *CheckView, 1)
	h.f.SetCheckObserver(func(ev CheckEvent) {
		if ev.View != nil {
			views <- ev.View
		}
	})
	return func() (*CheckView, string) {
		h.apply(checkEntryCmd(at(time.Hour)))
		v := <-views
		t.Cleanup(v.Release)
		return v, mustHash(t, h.f)
	}
}

// A paced hash reads the view in chunks, releasing the FSM's lock between
// them, yet hashes exactly what a full-speed hash does; its rate holds it
// back; and it stops when its context ends.
func Test_CheckHashPacedMatchesFullSpeed(t *testing.T) {
	next := pacedViews(t)

	v, want := next()
	full, errFull := v.Hash()
	paced, errPaced := v.HashPaced(context.Background(), func() int64 { return 64 << 20 })
	if errFull != nil || errPaced != nil || full != want || paced != want {
		t.Fatalf("full %s (%v), paced %s (%v); want the keyspace's %s", full, errFull, paced, errPaced, want)
	}

	const rate = 4 << 20 // bytes a second: about 0.8 s for the keyspace
	v, want = next()
	start := time.Now()
	paced, err := v.HashPaced(context.Background(), func() int64 { return rate })
	took := time.Since(start)
	if err != nil || paced != want {
		t.Fatalf("paced hash %s, %v; want %s", paced, err, want)
	}
	// Three full chunks were read before the last one, so the pace held it
	// back at least 3 MiB / rate.
	if least := time.Duration(float64(3*hashChunk) / rate * float64(time.Second)); took < least {
		t.Fatalf("paced hash took %v, want at least %v at %d B/s", took, least, rate)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, _ = next()
	if _, err := v.HashPaced(ctx, func() int64 { return 1 }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled hash: %v, want context.Canceled", err)
	}
}
