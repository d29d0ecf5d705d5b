// Package peer is how a node deals with the other nodes of its cluster:
// the cluster's identity, checked on every channel a peer can use, and
// pools of gRPC client connections to them.
//
// Identity holds the cluster's id and refuses a peer of another cluster
// (ErrOtherCluster): on Raft inside the TLS handshake (the id rides in
// ALPN, so Raft's bytes do not change), on gossip, and on forwarded and
// node-to-node gRPC calls (a header checked by UnaryClient and the
// server). Until the leader names the cluster, a node or a peer without
// an id passes.
//
// Pool keeps one lazy connection per peer address, bounded by the few
// addresses a cluster has. A node holds two pools of this one type: its
// own for status calls, consistency-check hashes and membership, and
// transport's for forwarding, which needs unbounded message sizes and
// large flow-control windows that status calls should not have.
//
// What it must not do: let a peer of another cluster in on any channel,
// or open more than one connection per address in a pool.
package peer
