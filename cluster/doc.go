// Package cluster runs one Docket server: hashicorp/raft with raft-boltdb/v2
// as the fsync'd log and stable store (behind raft.NewLogCache), a file
// snapshot store, a TCP NetworkTransport, and the fsm package as the state
// machine. It owns what only a running server knows: who leads, the leader's
// clock, and the leader-only loops (reaper, delayed mover, retention purge)
// that turn time into commands.
//
// Boot: the FSM is persistent, so Raft is told not to restore the snapshot
// on start; bootRestore restores it only when Pebble's applied index is
// behind the newest snapshot. Raft then replays the log above its last
// snapshot and the FSM skips what it already holds.
//
// Membership: BootstrapExpect and Join form the first configuration; peers
// are learned by polling the Join addresses' Cluster.Status (the seam that
// memberlist gossip replaces), and the peer book maps Raft ids to gRPC
// addresses for leader hints.
//
// Consistency check (checker.go, after CockroachDB's): the leader proposes
// a Check entry when it wins and every CheckInterval (default 1m). Each
// node's FSM commits its apply batch at the Check and hands out a Pebble
// snapshot of exactly that index; the node hashes it on another goroutine.
// The leader asks every voter for its hash at the index (Cluster.Status
// with check_index) and, once a majority agrees, records that hash with a
// CheckResult entry. A node that applies the result and finds its own hash
// different is diverged: it goes NOT_SERVING, refuses the Queue API with
// Unavailable (reason NOT_SERVING), hands leadership over if it leads,
// shuts its Raft down (so it never leads or votes again), writes a DIVERGED
// file into its data dir, and waits for repair. A node that starts from
// existing data is NOT_SERVING and refuses the Queue API until a check
// passes on it; the leader runs one as soon as it sees such a voter (its
// discovery poll) or when it wins itself.
//
// # Repair of a diverged node
//
//  1. Read why: `docket cluster status` against the node shows the check
//     index and both hashes, and the DIVERGED file repeats them.
//  2. Stop the node and move its whole data dir away (keep it for a
//     post-mortem of the disk). The node refuses to start while DIVERGED
//     is there.
//  3. Start it again with the same id and addresses and an empty data dir.
//     It is still a voter in the configuration, so the leader replicates a
//     snapshot and the log to it; it serves once the next check passes.
//     If the cluster cannot wait, `docket cluster` RemoveServer and a
//     fresh join do the same.
//
// # Decisions and trade-offs
//
//   - Timeouts are tuned for a LAN (Config documents each): a leader crash
//     is followed by a new leader in roughly 0.5-1.5 s.
//   - Propose waits for the FSM's answer; BatchApplyCh lets concurrent
//     proposals share one append and fsync, which is the throughput lever.
//   - A new leader runs a Barrier, then waits ReapGrace before reaping, so a
//     worker whose heartbeat was lost in the failover can retry it.
//   - ReadBarrier uses VerifyLeader plus waiting for the apply index instead
//     of a Barrier entry, so linearizable reads cost a heartbeat round, not
//     an fsync.
//   - Shutdown transfers leadership but does not leave the configuration: a
//     rolling restart keeps quorum size stable.
//   - Consistency checks hash every key, nothing excluded (m/applied and
//     m/now agree at the check index by construction). One hash runs at a
//     time per node; a Check that arrives while one runs is skipped there,
//     so that node has no verdict for it and the next check covers it.
//   - A diverged node is repaired by wipe and rejoin, not by rebuilding
//     itself from a snapshot in place: the snapshot would come from the
//     leader over InstallSnapshot anyway, and doing it by hand keeps the
//     damaged disk for a post-mortem and the decision with an operator.
//     A corrupt Pebble MANIFEST cannot be refused at open: Pebble v2.1.7
//     stops replaying the MANIFEST at the first bad record and opens
//     without error (version_set.go, load: IsInvalidRecord => break), and
//     no option changes that; only a damaged first record fails the open
//     ("malformed manifest"). The check is what catches the rest.
//   - A restarted node refuses service until checked, because the damage
//     above is silent: a stale read, or a leader's answer, from a keyspace
//     that lost tasks says NotFound for acknowledged work. A new leader
//     checks first thing, so a full-cluster restart is unavailable for
//     about one hash of the keyspace.
//   - New command types (Check, CheckResult) are proposed only once every
//     voter has answered a Status with a consistency section, remembered
//     in peers.json: an older build would stop on the unknown type. This is
//     not yet the log-latched feature switch DESIGN.md asks for; a voter
//     added later with an older build is only protected if it is seen
//     before the next check.
//   - The leader waits at most CheckTimeout for hashes and records nothing
//     without a majority, so too few live voters, or voters that all
//     disagree, stop nobody (the error is logged).
//   - NewBareRaft (bare.go) builds Raft from a Config exactly as New does
//     (same raft.Config, stores, LogCache, transport) over a caller's FSM,
//     so `docket bench` measures the Raft ceiling with the node's own
//     wiring rather than a copy that could drift from it.
package cluster
