package cluster

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// roleState is what every log line of a node carries besides its id: the
// Raft term and the leader it knows, so an operator can line up one task's
// story across every node's log. It is read with atomics only, because
// Raft logs from inside its own locks.
type roleState struct {
	raft   atomic.Pointer[raft.Raft]
	leader atomic.Pointer[string]
	// changes counts leader changes this node observed (a new leader, or
	// none); the metrics export it.
	changes atomic.Uint64
}

func (s *roleState) attrs() []slog.Attr {
	r := s.raft.Load()
	if r == nil {
		return nil
	}
	leader := ""
	if p := s.leader.Load(); p != nil {
		leader = *p
	}
	return []slog.Attr{slog.Uint64("term", r.CurrentTerm()), slog.String("leader", leader)}
}

// roleHandler adds roleState's attributes to each record at the moment it
// is logged.
type roleHandler struct {
	slog.Handler
	s *roleState
}

func (h roleHandler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := h.s.attrs(); attrs != nil {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h roleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return roleHandler{Handler: h.Handler.WithAttrs(attrs), s: h.s}
}

func (h roleHandler) WithGroup(name string) slog.Handler {
	return roleHandler{Handler: h.Handler.WithGroup(name), s: h.s}
}

// observeLeaders keeps roleState's leader current from Raft's
// observations until stop closes. The observer drops what it cannot
// deliver rather than block Raft; the next observation corrects it.
func (s *roleState) observeLeaders(r *raft.Raft, stop <-chan struct{}) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(obs)
	defer r.DeregisterObserver(obs)
	for {
		select {
		case <-stop:
			return
		case o := <-ch:
			id := string(o.Data.(raft.LeaderObservation).LeaderID)
			s.leader.Store(&id)
			s.changes.Add(1)
		}
	}
}
