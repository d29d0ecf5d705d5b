// Package raftlog is Raft's plumbing on one node: the log and stable
// store, and the network Raft speaks to its peers.
//
// The store is raft-boltdb/v2 or raft-wal behind one Store that checksums
// every entry and stable value, refuses damaged bytes with
// ErrRaftStoreCorrupt, and counts the bytes of the entries it holds for the
// log's byte budget.
//
// The network is the stream layer under hashicorp/raft's NetworkTransport:
// plain TCP or mutual TLS that carries the cluster's identity in ALPN, a
// bound on inbound connections, and the campaign gate (Gate) that holds a
// node's vote requests back while it may not lead.
//
// What it must not do: acknowledge a write that is not fsync'd, repair a
// damaged log on its own, switch a data dir from one store to the other,
// accept a peer of another cluster, count a handshake against anything
// but its deadline, or change the bytes Raft sends.
//
// The design, with its decisions and trade-offs, is in DESIGN.md beside
// this file.
package raftlog
