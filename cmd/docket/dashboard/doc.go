// Package dashboard is Docket's web dashboard, an operator console that
// `docket agent --http-addr` serves: the Cluster, Queues, Queue, Task, Dead
// letters and Live leases pages, and their actions (pause, resume and purge
// a queue, delete its dead letters; cancel, run now, requeue and
// reprioritise a task). It owns the pages, their templates and script, the
// login cookie, the form tokens and the rate history.
//
// It is a client of its own node's gRPC API: every call carries the
// viewer's token, so the API decides, once, what the viewer may see and do.
//
// What it must not do: read the FSM or any replica directly, decide who may
// see or do what (it only hides controls the API would refuse), render a
// current claim's fence, or grow without bound (every call, listing and
// history is capped).
//
// DESIGN.md describes how the pages, actions, login and rate history work,
// and the decisions and trade-offs behind them.
package dashboard
