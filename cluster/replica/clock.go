package replica

// A member's time: the leader's clock is the one clock of the write path
// (the FSM sees time only as the `now` stamped into commands).

import (
	"context"
	"time"
)

// Clock is where the leader's time comes from.
type Clock interface {
	Now() time.Time
}

// Offset is the wall clock shifted by a fixed offset: the chaos harness's
// seam for clock skew between leaders.
type Offset time.Duration

// Now is the wall clock plus the offset.
func (c Offset) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// Sleep waits d or until ctx ends; false means ctx ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
