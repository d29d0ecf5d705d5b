// Package cluster runs one Docket server: hashicorp/raft over checksummed,
// fsync'd log stores with the fsm package as its state machine, snapshots,
// boot and recovery, leadership and its loops, and the node's health. It
// hands the API layer the Node (the member itself) and the Node's Service
// (the write and read paths).
//
// What it must not do: change the keyspace outside Raft, decide a queue
// rule (the FSM judges every command in apply), speak the gRPC API (that
// is transport's), accept a peer of another cluster, or acknowledge a
// write before a majority has fsync'd it.
//
// Its rooms, one job each:
//
//	cluster             the assembly: Node, Config, boot, leadership, latch, metrics
//	cluster/service     what transport calls: admit, group commit, claims, reads, tokens
//	cluster/leader      the leader's housekeeping loops: reaper, timeouts, mover, scheduler
//	cluster/check       the consistency check and the scrub
//	cluster/membership  reconcile rule book, reconciler, peer book, removals
//	cluster/raftlog     Raft's plumbing: checksummed log stores and the network
//	cluster/health      the node's view of its disk: Pebble episodes, failed appends, ballast
//	cluster/peer        dealing with peers: the cluster identity, connection pools
//	cluster/replica     the contract between a Raft member and its proposers, and its clock
//	cluster/gossip      the memberlist pool and what each server announces
//	cluster/certs       TLS material, reloaded on SIGHUP
//	cluster/memnode     an in-memory stand-in for a Node, for tests only
//
// cluster/internal/nodetest starts real nodes for the rooms' tests. The
// design, with the invariants, one Claim's walk and the decisions, is in
// DESIGN.md beside this file; a room with a design of its own keeps it in
// its own DESIGN.md.
package cluster
