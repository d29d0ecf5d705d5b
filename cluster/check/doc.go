// Package check is the consistency check and the scrub. Every voter
// hashes its keyspace at the same Check entry; the leader collects the
// hashes, records the majority's in a CheckResult entry, and a node whose
// own hash differs stops serving and leaves Raft. A node started from
// existing data serves nothing until a check passes on it. The scrub
// re-reads the table and blob files on disk on a schedule.
//
// What it must not do: repair a keyspace (an operator wipes a diverged
// node and it rejoins), hash on Raft's apply goroutine, or let a restarted
// node serve before a check.
//
// The design, with its decisions and trade-offs, is in DESIGN.md beside
// this file.
package check
