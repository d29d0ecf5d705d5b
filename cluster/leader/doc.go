// Package leader is the leader's housekeeping: the reaper, execution
// timeouts, the delayed-task mover, the retention purge, the scheduler
// and the bootstrap token. Each loop turns the leader's clock into
// commands built from its own replica.
//
// What it must not do: decide a queue rule (the FSM re-checks every fence,
// deadline and slot in apply), run on a follower (cluster starts Run when
// the node wins and cancels it when it loses), or write outside Raft.
//
// The design, with its decisions and trade-offs, is in DESIGN.md beside
// this file.
package leader
