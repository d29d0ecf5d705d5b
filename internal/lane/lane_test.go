package lane

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
)

// Test_Lane: a call goes at once while a slot is free; while the only
// slot is taken, the calls that arrive go together, within the bounds,
// and a call that does not fit starts the next batch.
func Test_Lane(t *testing.T) {
	cases := []struct {
		name   string
		bounds Bounds
		want   [][]int
	}{
		{"no bounds: one batch", Bounds{}, [][]int{{0}, {1, 2, 3, 4, 5}}},
		{"two calls a batch", Bounds{Calls: 2}, [][]int{{0}, {1, 2}, {3, 4}, {5}}},
		{"weight 5 (each call weighs its value)", Bounds{Weight: 5}, [][]int{{0}, {1, 2}, {3}, {4}, {5}}},
		{"12 bytes (4 a call)", Bounds{Bytes: 12}, [][]int{{0}, {1, 2, 3}, {4, 5}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			batches := make(chan []int, 16)
			dones := make(chan func(), 16)
			l := New(16, 1, c.bounds, func(v int) (int, int) { return v, 4 },
				func(b []int, done func()) { batches <- append([]int(nil), b...); dones <- done })
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan []int, 1)
			go func() { ran <- l.Run(ctx) }()
			l.Calls() <- 0
			first := <-batches // alone, at once: the slot was free
			for v := 1; v <= 5; v++ {
				l.Calls() <- v
			}
			got := [][]int{first}
			for len(flat(got)) < 6 {
				(<-dones)() // free the slot: the queued calls go
				select {
				case b := <-batches:
					got = append(got, b)
				case <-time.After(5 * time.Second):
					t.Fatalf("no batch after %v", got)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("batches %v, want %v", got, c.want)
			}
			cancel()
			if held := <-ran; len(held) != 0 {
				t.Fatalf("Run held %v at its end, want nothing", held)
			}
		})
	}
}

// Test_LaneRunReturnsTheCallItHeld: a call taken while every slot is busy
// is handed back when the lane stops, and the queued ones are Drain's.
func Test_LaneRunReturnsTheCallItHeld(t *testing.T) {
	flushed := make(chan struct{}, 1)
	l := New(16, 1, Bounds{}, func(int) (int, int) { return 1, 1 }, func([]int, func()) { flushed <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan []int, 1)
	go func() { ran <- l.Run(ctx) }()
	l.Calls() <- 1
	<-flushed // its slot is never freed
	l.Calls() <- 2
	testwait.For(t, 5*time.Second, "Run to take the second call and wait for a slot", func() bool { return l.Queued() == 0 })
	l.Calls() <- 3
	cancel()
	if held := <-ran; !reflect.DeepEqual(held, []int{2}) {
		t.Fatalf("held %v, want [2]", held)
	}
	if left := l.Drain(); !reflect.DeepEqual(left, []int{3}) {
		t.Fatalf("drained %v, want [3]", left)
	}
}

func flat(bs [][]int) []int {
	var out []int
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// Test_LaneTryAlone: a caller may go alone, on its own goroutine, only
// while no call waits and a slot is free; a call that waits for a slot
// gets the next one freed, before any caller that tries to go alone.
func Test_LaneTryAlone(t *testing.T) {
	flushed := make(chan func(), 4)
	l := New(16, 1, Bounds{}, func(int) (int, int) { return 1, 1 }, func(_ []int, done func()) { flushed <- done })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan []int, 1)
	go func() { ran <- l.Run(ctx) }()

	done := l.TryAlone()
	if done == nil {
		t.Fatal("TryAlone refused an idle lane")
	}
	if l.TryAlone() != nil {
		t.Fatal("TryAlone took a second slot of a lane of one")
	}
	l.Calls() <- 1 // waits: the one slot is the lone caller's
	testwait.For(t, 5*time.Second, "Run to take the call and wait for a slot", func() bool { return l.Queued() == 0 })
	if l.TryAlone() != nil {
		t.Fatal("TryAlone went ahead of a call waiting for a slot")
	}
	done()
	select {
	case free := <-flushed: // the waiting call had the slot
		if l.TryAlone() != nil {
			t.Fatal("TryAlone took a slot the flushed batch holds")
		}
		free()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting call never had the freed slot")
	}
	testwait.For(t, 5*time.Second, "the lane to be idle again", func() bool {
		d := l.TryAlone()
		if d != nil {
			d()
		}
		return d != nil
	})
	cancel()
	if held := <-ran; len(held) != 0 {
		t.Fatalf("Run held %v at its end, want nothing", held)
	}
}

// Test_LaneBurst: on a lane WithBurst, a batch that is full goes in an
// extra slot while every slot is taken, and one that is not waits for a
// slot; the batches are those a lane without a burst would make.
func Test_LaneBurst(t *testing.T) {
	batches := make(chan []int, 16)
	dones := make(chan func(), 16)
	// Four bytes a call, twelve a batch: three calls fill one.
	l := New(16, 1, Bounds{Bytes: 12}, func(int) (int, int) { return 1, 4 },
		func(b []int, done func()) { batches <- append([]int(nil), b...); dones <- done }).WithBurst(1)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan []int, 1)
	go func() { ran <- l.Run(ctx) }()
	next := func(what string) []int {
		t.Helper()
		select {
		case b := <-batches:
			return b
		case <-time.After(5 * time.Second):
			t.Fatalf("no batch: %s", what)
			return nil
		}
	}
	l.Calls() <- 0
	if b := next("the first call, alone"); !reflect.DeepEqual(b, []int{0}) {
		t.Fatalf("first batch %v, want [0]", b)
	}
	for v := 1; v <= 3; v++ {
		l.Calls() <- v
	}
	testwait.For(t, 5*time.Second, "Run to hold three calls", func() bool { return l.Waiting() == 3 && l.Queued() == 0 })
	if len(batches) != 0 {
		t.Fatalf("a batch that is not full went while the only slot was taken: %v", <-batches)
	}
	l.Calls() <- 4 // does not fit: the batch of 1, 2, 3 is full
	if b := next("a full batch, in the extra slot"); !reflect.DeepEqual(b, []int{1, 2, 3}) {
		t.Fatalf("burst batch %v, want [1 2 3]", b)
	}
	for v := 5; v <= 7; v++ { // 4, 5, 6 fill the next batch; 7 does not fit
		l.Calls() <- v
	}
	// Queued() == 0 too: Waiting() is also 4 while Run holds 4 and 5 with
	// 6 and 7 still queued, and a slot freed then may send [4 5].
	testwait.For(t, 5*time.Second, "Run to hold the next batch and the call past it", func() bool { return l.Waiting() == 4 && l.Queued() == 0 })
	if len(batches) != 0 {
		t.Fatalf("a batch went with the slot and the extra slot both taken: %v", <-batches)
	}
	(<-dones)() // the first call's slot
	if b := next("the next full batch"); !reflect.DeepEqual(b, []int{4, 5, 6}) {
		t.Fatalf("batch %v, want [4 5 6]", b)
	}
	cancel()
	if held := <-ran; !reflect.DeepEqual(held, []int{7}) {
		t.Fatalf("Run held %v at its end, want [7]", held)
	}
}
