// Package membership decides who belongs to the Raft configuration. It
// holds Decide, the reconcile rule book (a pure function of the leader's
// view, with its scenarios in testdata/), the Reconciler that runs it on
// the leader and applies its actions through a narrow Raft interface, the
// peer book a node keeps of the servers it has seen, and the operator's
// recent removals.
//
// What it must not do: remove voters below MinQuorum or more than
// (voters-1)/2 in a round, add a server whose build is below the latched
// feature level, or remove the leader itself.
//
// The design, with its decisions and trade-offs, is in DESIGN.md beside
// this file.
package membership
