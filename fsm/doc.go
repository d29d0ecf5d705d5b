// Package fsm is Docket's pure core: the deterministic state machine that
// every node runs. It takes Raft log entries holding Commands, decides the
// queue's rules, and writes the outcome into one Pebble batch per apply
// batch, together with the applied index.
//
// Every replica's ApplyBatch decodes each command (an undecodable entry or
// an unknown type stops the node, since skipping it would diverge),
// validates it again with the FSM's own bounds (a bad value is an answer
// that changes nothing), and runs one rule function over an indexed batch:
// enqueue, claim, heartbeat, submit, nack, cancel, reap, promoteDelayed,
// purge, requeueDead, release, putSchedule, fireSchedule, setQueueLimits
// and the rest (txn.run has the list; inside enqueue and every move to an
// end, the task dependencies of rules_deps.go). Each rule changes a stored
// task only through txn.move (txn.write for a new one, txn.remove for a
// deleted one), which keeps the index keys, the counters and the
// one-index-per-task invariant together.
//
// fsm owns the rules and their dispatch, apply (the applied index and now,
// the proposer checksum, feature levels, consistency-check entries), the
// snapshot's lifetime against Raft, the idempotency filter and the read API
// over the live keyspace. storage owns every key's encoding and all I/O
// around the keyspace.
//
// What it must not do: apply reads nothing but the command, the entry's
// index and Pebble. No clock, no randomness, no map order, no goroutines,
// no os, no network, no process exit. Time is max(last now, cmd.now); ids
// come from the entry's index and position; a claim's fence is the index of
// its entry. cmd/docket's Test_LayoutFSMIsPure checks the imports.
//
// DESIGN.md describes how apply works, the determinism rules, validation
// against apply's checks, what each feature level writes, what apply keeps
// in memory, and the decisions and trade-offs behind the rules. The rules
// themselves are pinned by the rule book, testdata/*.txt.
package fsm
