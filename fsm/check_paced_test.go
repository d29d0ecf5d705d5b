package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// chunkedViews builds a keyspace of several hash chunks and returns a func
// that applies a Check entry and gives its view with the keyspace's hash
// at that entry, as FSM.Hash answers it.
func chunkedViews(t *testing.T) func() (*CheckView, string) {
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

// A hash read in chunks, the FSM's lock released between them, is exactly
// the full hash; the caller sees the bytes read after each chunk (where
// the consistency checker paces it), and an error there stops the hash.
func Test_CheckHashChunkedMatchesFullHash(t *testing.T) {
	next := chunkedViews(t)

	v, want := next()
	full, err := v.Hash()
	if err != nil || full != want {
		t.Fatalf("full hash %s, %v; want the keyspace's %s", full, err, want)
	}
	var reads []int64
	chunked, err := v.HashChunked(func(read int64) error {
		reads = append(reads, read)
		return nil
	})
	if err != nil || chunked != want {
		t.Fatalf("chunked hash %s, %v; want %s", chunked, err, want)
	}
	if len(reads) < 3 {
		t.Fatalf("%d chunks of a 3 MB keyspace, want at least 3", len(reads))
	}
	for i, r := range reads {
		if r < int64(i+1)*hashChunk {
			t.Fatalf("after chunk %d: %d bytes read, want at least %d", i+1, r, int64(i+1)*hashChunk)
		}
	}

	stop := errors.New("stop")
	v, _ = next()
	if _, err := v.HashChunked(func(int64) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("hash stopped by its caller: %v, want %v", err, stop)
	}
}
