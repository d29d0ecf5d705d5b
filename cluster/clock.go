package cluster

import "time"

// Clock is where the leader's time comes from. It is the only clock in the
// write path: the FSM sees time only as the `now` stamped into commands.
type Clock interface {
	Now() time.Time
}

// offsetClock is the wall clock shifted by a fixed offset: the chaos
// harness's seam for clock skew between leaders.
type offsetClock struct{ offset time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.offset) }
