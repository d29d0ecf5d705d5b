package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Callers branch on errors.Is(err, ErrNotLeader) and read the hint with
// errors.As; both must see through wrapping.
func Test_NotLeaderErrorIsErrNotLeader(t *testing.T) {
	err := fmt.Errorf("propose: %w", &NotLeaderError{LeaderID: "n2", LeaderGRPC: "10.0.0.2:7000"})
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("%v is not ErrNotLeader", err)
	}
	if errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("%v is ErrLeadershipLost: a not-leader answer would be read as an unknown outcome", err)
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderGRPC != "10.0.0.2:7000" {
		t.Fatalf("errors.As lost the leader's address: %v", nl)
	}
	if got := (&NotLeaderError{}).Error(); got != "not the leader: no leader known" {
		t.Fatalf("hint with no leader = %q", got)
	}
}

func Test_OffsetClockShiftsTheWallClock(t *testing.T) {
	c := Offset(time.Hour)
	if d := time.Until(c.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("an hour's offset is %v ahead", d)
	}
}

func Test_SleepEndsWithItsContext(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("a sleep with a live context reported its context ended")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("a sleep with an ended context reported it slept")
	}
	if time.Since(start) > time.Second {
		t.Fatal("a sleep did not end with its context")
	}
}
