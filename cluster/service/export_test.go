package service

import "github.com/dockethq/docket/fsm"

// Hooks into the Service's internals for this package's external tests,
// which run it over a memnode.Node (memnode imports this package, so those
// tests cannot live inside it).

// GateReserve reserves want tasks of ref at the claim gate, as a claim in
// flight does, and returns how many it got.
func GateReserve(s *Service, ref fsm.QueueRef, want int, avail func() int) int {
	n, _ := s.gate.reserve(ref, want, avail)
	return n
}

// GateTake takes want tasks of ref at the claim gate, as a claim riding
// on submits does.
func GateTake(s *Service, ref fsm.QueueRef, want int, avail func() int) int {
	return s.gate.take(ref, want, avail)
}

// GateRelease releases n reserved tasks of ref, as an applied claim does.
func GateRelease(s *Service, ref fsm.QueueRef, n int) { s.gate.release(ref, n) }

// GateWaiting reports whether a claim waits at the gate for ref.
func GateWaiting(s *Service, ref fsm.QueueRef) bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	_, ok := s.gate.released[ref]
	return ok
}

// WatchQueue registers a long poll on ref with the Service's hub.
func WatchQueue(s *Service, ref fsm.QueueRef) (<-chan struct{}, func()) { return s.hub.watchQueue(ref) }

// Admit runs a Claim's admission for up to want tasks of ref, as a
// waiting Claim does before it proposes: the reservation (0: wait) and
// when the next delayed task becomes visible (0: none).
func Admit(s *Service, ref fsm.QueueRef, want int) (int, int64) {
	n, next, _ := s.admit(ref, want)
	return n, next
}

// Avail is how many Claims of ref a wake-up lets propose now.
func Avail(s *Service, ref fsm.QueueRef) int { return s.avail(ref) }
