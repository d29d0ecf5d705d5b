// Package client is the Go client of Docket: it finds the cluster's
// leader, follows it when it moves, retries by error class inside the
// caller's deadline, shares RPCs between concurrent callers, and runs
// workers that heartbeat their leases on their own.
//
// # Using it
//
// New is the one constructor: node addresses and options (With*; WithEnv
// reads DOCKET_ADDR, DOCKET_TLS_* and DOCKET_TOKEN). A producer calls
// EnqueueJSON, EnqueueOne or Enqueue; task options are Task* (TaskPriority,
// TaskDelay, TaskTimeout, TaskAfter, ...). A worker is a Worker over a
// Handler, run by NewWorker and Run or by Client.Work; Handle and
// HandleResult adapt a function of the payload's Go type. On return the
// Worker submits the result under the claim's fence, nacks on error, or
// fails the task for an error wrapping ErrPermanent.
//
// Get, GetStale and Wait read a task as a TaskInfo in Go types (State,
// Outcome, time.Time); ClaimTasks, CompleteClaim, FailClaim and NackClaim
// claim and finish tasks by hand, without a Worker; GetParents reads a
// DAG child's parents. The wire-typed calls they run (ReadTask,
// WaitResult, Claim, Submit, Nack, ParentResults) stay for what TaskInfo
// leaves out. The examples in example_test.go run under go test.
//
// # What it must not do
//
// It retries after an unknown outcome (ErrOutcomeUnknown) only calls that
// are safe to repeat: an Enqueue always carries an idempotency key, fenced
// calls are idempotent, and Nack, RequeueDead and TransferLeadership return
// the error instead. A worker never works past the server's lease by its
// own clock. It spells no word of the error contract itself (those come
// from proto/docketv1), closes no connection before Close, and imports
// nothing of Docket but proto.
//
// DESIGN.md describes leader discovery and following, the retry classes,
// shared RPCs, the worker loop, and the decisions and trade-offs behind
// them.
package client
