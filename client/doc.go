// Package client is the Go client of Docket: it finds the cluster's
// leader, follows it when it moves, retries by error class, and runs
// workers that heartbeat their leases on their own.
//
// # Using it
//
// New is the one constructor: node addresses and options. Options of the
// Client are named With* (WithTLS, WithToken, WithAttemptTimeout, ...);
// WithEnv reads the environment the docket CLI reads (DOCKET_ADDR,
// DOCKET_TLS_*, DOCKET_TOKEN). Options of a task are of another type,
// TaskOption, and named Task* (TaskPriority, TaskDelay, TaskTimeout,
// TaskAfter, ...), so a task's execution timeout cannot be taken for a
// call's.
//
// A producer calls EnqueueJSON (or EnqueueOne with bytes, or Enqueue with
// whole NewTask messages, for a graph of tasks in one call). A worker is a
// Worker run by NewWorker and Run, or by Client.Work, over a Handler. Handle
// and HandleResult adapt a function of the payload's Go type to a Handler:
// the payload is decoded with a Codec (JSONCodec unless HandleCodec names
// another) and a result is encoded with it. A payload that does not decode
// never reaches the function: the task is nacked with an error wrapping
// ErrBadPayload, so a worker of another build may still run it, and after
// its max attempts it waits among the dead letters with that cause. A
// result that does not encode fails the task for good, since running it
// again would repeat its effects.
//
// Methods say what they do by their name rather than by a flag: ReadTask
// is linearizable and ReadTaskStale reads any node's replica; PurgeQueued
// and PurgeDead delete different tasks; CancelTask is the one cancel. The
// names these replace (NewWithOptions, GetTask, PurgeQueue, Cancel and the
// task options' With* names) still work, marked deprecated.
//
// # Finding and following the leader
//
// New is given one or more node addresses. It makes one gRPC connection per
// address (grpc.NewClient: no I/O until the first call) and asks every
// known node for Cluster.Status in parallel; the first answer that names a
// leader is cached, and the servers listed in the answers are added to the
// known nodes. Every call goes to the cached leader. Every node puts the
// leader's address in the "docket-leader" header or trailer of its answers
// (a NOT_LEADER error also names it in its ErrorInfo metadata); when that
// differs from the node called, the client switches to it at once
// (a follower forwards writes, so the call itself usually succeeded). An
// Unavailable answer without a new hint drops the cached leader, and the
// next attempt discovers again. Concurrent callers share one discovery.
// When no node knows a leader, attempts go round-robin over the known
// nodes, which forward or answer with a hint.
//
// Retries go in rounds: each known node the client can connect to is tried
// at most once per round, without sleeping, and only a round in which every
// one failed ends in a backoff sleep. A killed leader's port refuses
// connections at once, so the next attempt asks the others right away.
// Within a round, a hint or a Status answer naming a node that already
// failed in it, or one whose connection is in TRANSIENT_FAILURE, is not
// followed: right after the leader dies its followers still name it until
// their heartbeat timeout. Calls are not WaitForReady, so a connection in
// gRPC's reconnect backoff fails them at once instead of holding them; that
// backoff is capped at 1 s, so a node that comes back is reachable within a
// second.
//
// # Retries by error class
//
// One function maps every gRPC status to one of the sentinel errors, once,
// and the retry loop decides on the sentinel:
//
//   - ErrNoLeader (Unavailable, connection failures): retried with
//     full-jitter exponential backoff until the caller's ctx ends.
//   - ErrOutcomeUnknown (Unavailable with reason LEADERSHIP_LOST, or an
//     attempt with no answer within its budget): retried
//     only for calls that are safe to repeat: Enqueue (it always carries an
//     idempotency key, minted before the first attempt), Claim (a lost
//     reply leaves a lease to expire), Heartbeat and Submit (fenced),
//     CancelTask (a retry that finds the task cancelled reports success),
//     PauseQueue and ResumeQueue (they set a state; a retry may then say
//     unchanged), PurgeQueued and PurgeDead (a retry deletes only what is
//     left, and its count misses what the lost attempt deleted), and
//     reads. Nack, RequeueDead and TransferLeadership return it.
//   - ErrInvalidArgument, ErrNotFound, ErrStaleFence, ErrWrongState,
//     ErrTooLarge, ErrTenantLimit: answers, never retried. ErrTenantLimit
//     may succeed later, once the tenant's tasks are purged; how long that
//     takes is the caller's business, not a retry loop's.
//
// When ctx ends during retries the error wraps both the last answer and the
// context error, so errors.Is works for either. Without a deadline on ctx a
// call retries until ctx is cancelled.
//
// # Shared RPCs
//
// Concurrent Enqueue calls of one Client share Enqueue RPCs, concurrent
// Submits share SubmitBatch RPCs, concurrent Claims ClaimBatch RPCs and
// concurrent Heartbeats Heartbeat RPCs, once DefaultShareInflight RPCs of
// that kind are in flight (WithSharedRPCs): group commit without a
// linger, so a lone caller is sent at once and a busy process makes a few
// large requests instead of thousands of small ones (per-call gRPC work on
// both ends was half the cost of a single-task enqueue; BENCHMARKS.md).
// Each caller gets its own results; each claimer its own tasks, under its
// own worker id and lease. A caller whose ctx ends while its items ride a
// shared RPC gets ErrOutcomeUnknown: they may still apply, and a retry
// cannot apply them twice (idempotency keys, fences), or, for a claim,
// the tasks claimed for it wait out their lease.
//
// # Workers
//
// A Worker claims from one queue with long-polls that ask for as many tasks
// as it has free slots, and runs a Handler for each in its own goroutine.
// One heartbeat goroutine extends every in-flight lease in a single
// Heartbeat RPC per interval (Lease/3 by default) and carries the progress
// a handler set. A handler's ctx is cancelled, with cause ErrLeaseLost, when
// a heartbeat answer says the lease is gone, or when no heartbeat succeeded
// before the lease ran out by the local clock, counted from the moment the
// claim or heartbeat was sent, so that the local deadline is never later
// than the server's. On return the Worker submits the result under the
// claim's fence, nacks on error (after the delay RetryAfter asks for), or
// submits FAILED for an error that wraps ErrPermanent (see Permanent); a
// panic is recovered and nacked. Run returns after ctx ends and every
// handler, heartbeat and helper goroutine it started has stopped; handlers
// still running after ShutdownTimeout are cancelled and their tasks
// nacked.
//
// # Decisions and trade-offs
//
//   - Claims share a ClaimBatch that never waits. A shared RPC holds one
//     of a few slots until it answers, and a long poll may take 30 s, so
//     a Claim with a wait rides the sharer without one and, if it got
//     nothing, long-polls for the rest of its wait on its own Claim RPC,
//     outside the sharer. The price: a long-poll among other claims on an
//     empty queue is two RPCs (a try, then the poll) rather than one;
//     the try costs no Raft entry (the leader's admit gate sees nothing
//     to claim). A Claim alone, with a wait or without, is one RPC: a
//     lone Worker's long polls pay nothing for sharing.
//     Against a server older than ClaimBatch (Unimplemented) each caller
//     claims alone, as SubmitBatch falls back, and the sharer remembers
//     the answer for a minute (retrySharedAfter) rather than paying an
//     extra RPC per shared batch; then it asks again, so sharing returns
//     once a rolling upgrade reaches the leader. Heartbeats share the
//     Heartbeat RPC itself, which already takes many items; the Worker
//     sends its own leases in one, so this helps many Workers, or
//     callers, on one Client.
//   - An Enqueue whose tasks name parents (After, AfterIndex) is never
//     shared with other callers' Enqueues (WithSharedRPCs): AfterIndex
//     counts positions within the request, and the server refuses the
//     whole request for one unknown parent. Such a call is one RPC of its
//     own, which is also what makes a DAG atomic. Task.ParentResults uses
//     the worker's client under the task's own tenant.
//   - New blocks until one node answers Status (not until a leader is
//     elected), bounded by ctx. A wrong address then fails at start, not at
//     the first call; a caller that wants to start before the cluster gives
//     ctx more time.
//   - A leader hint is trusted without a Status round trip: it saves a call
//     on every leader change, and a stale hint costs one failed attempt.
//     Two confused nodes cannot make the client spin: a round tries each
//     node once, then sleeps.
//   - The backoff between rounds grows per call (full jitter, 50 ms
//     doubling to 500 ms), and a caller asleep in it does not learn that
//     another caller found the new leader, so it may sleep up to 500 ms
//     past an election. A longer cap costs more: shared RPCs make a busy
//     client look like one or two callers to the cluster, and with a 2 s
//     cap a failover's client share reached 0.6 s (BENCHMARKS.md).
//     Sleepers are not woken when another caller confirms a new leader.
//   - Connections are never closed before Close, even for nodes that left:
//     closing a connection under a call in flight would fail it with
//     Canceled, and an idle connection costs little. A long-lived client in
//     a cluster whose addresses churn keeps one idle connection per address
//     it ever saw.
//   - Every attempt has a time budget (WithAttemptTimeout, 2 s by
//     default; a long-poll's attempt gets its wait on top), and every
//     connection keepalive pings (WithKeepalive, 10 s, ack within 5 s).
//     Without them a leader frozen by SIGSTOP held calls until the
//     caller's deadline, though the others elected a new leader in 0.6 s;
//     now it costs about max(election, attempt timeout) plus one attempt
//     elsewhere. An abandoned attempt may still apply, so it ends in
//     ErrOutcomeUnknown and follows the rules above: repeatable calls go
//     on (idempotency keys, fences), Nack, RequeueDead and
//     TransferLeadership return it. The price: a cluster that is slow
//     rather than frozen sees abandoned writes sent again. Keepalive
//     covers what the budget does not: a long-poll on a frozen node ends
//     in about 15 s rather than its wait plus 2 s, and an idle
//     connection to one turns TRANSIENT_FAILURE, so rounds skip it.
//     Discovery, which must not wait on one node, has its own timeout.
//   - Enqueue writes the minted idempotency key into the caller's NewTask.
//     That makes a caller's own retry with the same values idempotent too,
//     at the price of modifying the argument.
//   - A worker's Claim long-poll is cancelled at shutdown. If the server had
//     already claimed tasks for it, the reply is lost and those tasks wait
//     for their lease to expire; shutting down promptly was preferred over
//     waiting out a poll.
//   - Lease loss by the local clock is conservative: a heartbeat that
//     succeeded late may have extended a lease that the handler was already
//     told to drop. Stopping early is safe; working past the server's
//     deadline is not.
//   - A stale-fence error carries no server text, and stale items lose
//     their fence and state (hideStale): an older server named the task's
//     current fence there, and a worker that retried with it would defeat
//     fencing.
//   - After a lease loss the server reported, the handler's outcome is
//     dropped; after a loss by the local clock only, the Worker still tries
//     to report it, since the fence makes a late report safe and it may
//     still be accepted.
//   - The words of the error contract (ErrorInfo domain and reasons, the
//     metadata keys) and the request defaults (tenant, lease, list limit,
//     long-poll cap) come from package docketv1 (reasons.go, defaults.go),
//     which the server uses too; the client spells none of them. A test
//     (Test_EveryServerReasonIsMapped) fails when docketv1 lists a reason
//     the client has no sentinel for.
//   - Cancel requests (cancel.go): a heartbeat answer with cancel_requested
//     cancels the handler's ctx with cause ErrCancelRequested, and the
//     Worker keeps heartbeating until the handler returns, so a handler
//     that winds down slowly is not reaped meanwhile. It then reports as
//     usual: a nil error still Submits (the server keeps the result and
//     marks the task CANCELLED), any other Nacks. A heartbeat refused
//     TIMED_OUT cancels the ctx with cause ErrTimedOut and the Worker
//     reports nothing: the leader ends the claim by the task's policy,
//     and a Nack from the worker would be judged the same way anyway.
//     CancelTask says whether the task was running (a request) or waiting
//     (cancelled now).
//   - A payload that does not decode as a typed handler's type is retried
//     rather than failed: during a rolling upgrade of workers a payload
//     one build cannot read another may, and a payload no worker reads
//     ends among the dead letters, where it can be requeued once one does.
//     The price: a malformed payload costs its max attempts before it
//     gets there.
//   - Deprecated names are thin wrappers over the new ones, kept for one
//     release, so callers migrate at their own pace and both run the same
//     code.
package client
