// Package transport is Docket's gRPC server: the docket.v1.Queue and
// docket.v1.Cluster services, the gRPC health service and (when asked)
// server reflection, over one cluster member.
//
// It owns the wire and nothing else: handlers, forwarding a request to the
// leader (at most once, not checked again there), the mapping of every
// error to a gRPC status in one place (toStatus), authentication and
// authorization of calls, bounds on connections, streams and long polls,
// and health.
//
// What it must not do: decide a queue rule (that is the FSM's), build or
// batch Raft commands itself (that is cluster's: defaults, checks, group
// commit, long polls, reads at a consistency), or keep state beyond
// connections, counters and health. It imports only cluster and proto.
//
// DESIGN.md describes how a request flows, the error contract the Go client
// branches on, the bounds and health rules, and the decisions and
// trade-offs behind them.
package transport
