// Package service is a Docket server's write and read paths, the part of
// a node the API layer calls: request checks (once, on the node that
// received the request), command builders, group commit, the claim gate
// and long-poll waiters, reads at a chosen consistency, orphaned claims,
// tokens and the feature gate on proposals.
//
// What it must not do: speak Raft (it proposes through replica.Replica),
// decide a queue rule (the FSM judges every command in apply), or speak
// gRPC (transport maps its errors to codes).
//
// The design, with its decisions and trade-offs, is in DESIGN.md beside
// this file.
package service
