// Package raftnet is Raft's network: the stream layer (plain TCP, or
// mutual TLS that carries the cluster's identity in ALPN), the bound on
// inbound connections, hashicorp/raft's NetworkTransport settings, and the
// campaign gate that holds a node's vote requests back while it may not
// lead.
//
// What it must not do: accept a peer of another cluster, count a
// handshake against anything but its deadline, or change the bytes Raft
// sends.
package raftnet
