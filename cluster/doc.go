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
//   - Raft's listener is bounded: NetworkTransport runs over limitedStream,
//     a TCP StreamLayer whose listener (connlimit) closes inbound
//     connections past RaftMaxConns at accept, so a flood of connections to
//     the Raft port cannot take the descriptors Pebble and raft.db need
//     (issue 9). The price: while such a flood holds every slot, a peer
//     that needs a new connection is refused too and replication to this
//     node stalls until it ends; mutual TLS on Raft (DESIGN.md) is what
//     keeps outsiders off the port. Outgoing connections are not counted;
//     `docket agent` keeps them inside its descriptor reserve. memberlist
//     is not in the tree yet: when gossip arrives, its TCP listener needs
//     the same wrapping and its UDP packets a rate bound.
//   - NewBareRaft (bare.go) builds Raft from a Config exactly as New does
//     (same raft.Config, stores, LogCache, transport) over a caller's FSM,
//     so `docket bench` measures the Raft ceiling with the node's own
//     wiring rather than a copy that could drift from it.
//
// # Disk full and stuck apply (health.go)
//
//   - HealthProblems is what transport's health reports: the node answers
//     NOT_SERVING while (a) its last Raft log append failed (until one
//     succeeds), (b) Pebble reported a background error (until a flush or
//     compaction succeeds with no error for 1 s after it, or 30 s pass
//     without one), (c) Pebble has stalled writes for longer than
//     ApplyLagBound, or (d) an entry this node knows to be committed has
//     waited longer than ApplyLagBound (default 5 s) to be applied. (d) is
//     time, not entries: a count bound would flag a healthy node under a
//     burst and miss one stuck with a short backlog. A node replaying or
//     restoring far behind also trips it, which is honest: its local reads
//     are stale. Pebble's DiskSlow is logged, not a health problem: slow is
//     not broken, and a write that never finishes shows up as (c) or (d).
//   - A full disk makes Pebble fail every flush and retry at once (tens of
//     thousands of times a second), and then stall Commit, so the apply
//     goroutine blocks rather than panics. Each failure is logged when it
//     starts, every 30 s while it lasts (with a repeat count) and when it
//     ends; Pebble's own logging of each background error is replaced.
//   - A leader whose log append fails steps down (raft's dispatchLogs
//     answers the append's futures with the error and becomes follower).
//     The logGuard above the LogCache tags that error ErrLogWrite, because
//     the LogCache flattens the disk's error to text. Propose answers it as
//     ErrLeadershipLost (Unavailable, LEADERSHIP_LOST), not not-leader: the
//     entries were never sent to a follower, but a BoltDB commit that
//     failed in its final fsync may have reached the disk, and a node that
//     restarts with that entry could still be elected and commit it. So the
//     outcome is unknown; the client retries the calls that are safe to
//     repeat, as after any lost leadership.
//   - A leader whose apply is stuck (its Pebble cannot flush) answers no
//     Propose, yet Raft keeps it leader: its heartbeats go on, and once
//     its apply queue (128 batches) is full its main loop blocks, so the
//     cluster takes no write until that disk is freed. When apply stays
//     stuck for ApplyLagBound, the leader asks Raft to transfer
//     leadership; if that fails and apply made no progress meanwhile, it
//     shuts its Raft down (not waiting: that waits for the apply) so the
//     others elect, and stays NOT_SERVING until restarted. A lone voter
//     stays up: no one else could lead, and it recovers by itself once
//     there is space. A node replaying a long log after an election makes
//     progress, so it is not shut down.
//   - On a real disk Pebble panics when a WAL append fails (its
//     commitWrite), so a node whose Pebble fills may stop rather than
//     stall, depending on whether the WAL or a flush meets the full disk
//     first. Either way the ballast is the way back.
//   - The ballast (Config.BallastBytes, ballast.go) is for the operator:
//     the node creates it at start when missing and the disk has room for
//     it twice over, and never deletes it itself. Deleting it on ENOSPC
//     would delay the same stop by a few seconds of writes, turn health
//     back to SERVING over a disk that is still filling, and leave the
//     operator nothing to free when the node stops again. Whoever fixes
//     the cause (grows the volume, purges a tenant) deletes it to get the
//     node going, and the next start recreates it once there is room.
package cluster
