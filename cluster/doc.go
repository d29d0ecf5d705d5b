// Package cluster runs one Docket server: hashicorp/raft over checksummed,
// fsync'd log stores (raft-boltdb/v2 or raft-wal) with the fsm package as
// its state machine, snapshots, boot and recovery, and the node's health.
// It owns what only a running server knows: who leads, the leader's clock,
// and the leader-only loops (reaper, timeouts, delayed mover, retention
// purge, schedules, feature-level latch, consistency checks, membership
// reconcile) that turn time into commands. Its Service is what the API
// layer calls: request checks, group commit, long-poll claims and waits,
// and reads at a chosen consistency.
//
// What it must not do:
//
//   - change the keyspace outside Raft: every write is a command that the
//     FSM applies on every node, and apply reads no clock of this package;
//   - decide a queue rule: the FSM judges every command in apply, and this
//     package only carries bytes and time to it;
//   - speak the gRPC API: handlers, status codes and error mapping belong
//     to transport, which imports this package and never the other way;
//   - accept a peer of another cluster, or acknowledge a write before a
//     majority has fsync'd it.
//
// Sub-packages: gossip (the memberlist pool), certs (TLS material),
// connlimit (bounded listeners).
//
// The design, with the path of one Claim from the CLI to Pebble, the
// invariants each part keeps, the operator's repair steps and the
// decisions with their reasons, is in DESIGN.md beside this file.
package cluster
