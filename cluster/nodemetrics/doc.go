// Package nodemetrics is a node's Prometheus collector: what a scrape
// reads from the node at that moment (Raft's indexes and state, the FSM's
// applied index and latch, the consistency check, Pebble and health, the
// queue depths and totals, queue control and schedules).
//
// What it must not do: scan tasks (depths come from catalog counters),
// export unbounded label sets, or change anything it reads.
package nodemetrics
