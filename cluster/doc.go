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
package cluster
