// Package transport is Docket's gRPC server: the docket.v1.Queue and
// docket.v1.Cluster services, the gRPC health service and server
// reflection, over one cluster Node.
//
// The story of a request: any node accepts it. A write (Enqueue, Claim,
// Heartbeat, Submit, Nack, Cancel, RequeueDead) is normalised (an empty
// tenant becomes "default", Claim's max_tasks and lease get their
// defaults) and checked with fsm.Validate on the node that received it, so
// a bad value costs no hop and names its field. On the leader the handler
// builds a Command and Node.Propose replicates it; the FSM's answer becomes
// the response. On a follower the same RPC is re-issued on the leader over
// a cached connection, marked "docket-forwarded: 1" so it is forwarded at
// most once. Reads of task state are linearizable (Node.ReadBarrier on the
// leader, forwarded from followers) unless GetTask says allow_stale.
//
// Waiting is driven by the FSM, never by polling: the server registers the
// FSM's one observer and fans each applied batch's Event out to waiters. A
// long-poll Claim wakes when its queue gains pending tasks or when the
// queue's next delayed task becomes visible; WaitResult wakes when its task
// finishes. Concurrent Heartbeats on the leader are folded by a batcher
// goroutine into one Heartbeat command; each caller gets its own items'
// results. The other client commands (Enqueue, Claim, Submit, Nack,
// Cancel) go through the coalescer: group commit into fsm Batch entries.
//
// Every error is mapped to a gRPC status in one place, toStatus, called by
// the server's unary interceptor, which also puts the leader's address in
// the "docket-leader" header and trailer of every answer. The codes,
// ErrorInfo reasons (domain docket.dev) and metadata keys are the API the
// Go client branches on:
//
//	request does not decode    InvalidArgument (invalid UTF-8, bad wire bytes)
//	*fsm.FieldError            InvalidArgument + BadRequest naming the field
//	  oversize (fsm.IsTooLarge) ResourceExhausted + BadRequest
//	fsm.ErrNotFound            NotFound
//	fsm.ErrStaleFence          FailedPrecondition, reason STALE_FENCE
//	fsm.ErrWrongState          FailedPrecondition, reason WRONG_STATE
//	cluster.ErrLeadershipLost  Unavailable, reason LEADERSHIP_LOST (outcome unknown)
//	cluster.ErrNotLeader       Unavailable, reason NOT_LEADER (+ docket-leader)
//	cluster.ErrShutdown        Unavailable, reason SHUTTING_DOWN
//	context deadline, cancel   DeadlineExceeded, Canceled
//	anything else              Internal (logged)
//
// # Decisions and trade-offs
//
//   - Forwarding, not redirecting: a client that reaches any node gets an
//     answer, at the cost of one extra hop through a follower. The hint in
//     docket-leader lets a client go straight to the leader next time.
//     Forwarding once only means two nodes with stale views of each other
//     answer Unavailable rather than bounce a request until its deadline.
//   - The long poll runs on the leader, forwarded whole. The leader's
//     replica is the freshest, and its observer sees every enqueue first.
//   - A waiting Claim proposes only when the leader's replica shows a task
//     it could take, so idle workers cost no Raft entries. An event wakes
//     only as many of a queue's waiters, oldest first, as there are pending
//     tasks not reserved by claims in flight (claimGate), and only those
//     propose. Before, 256 waiting workers turned each enqueue into 256
//     wake-ups and 256 Claims, nearly all empty, applied on every replica.
//     A claim that finishes, and a woken waiter that leaves without
//     claiming, wake the next ones if unreserved tasks remain, so no task
//     is stranded by a reservation or a lost wake-up.
//   - Stats and ListDead are linearizable: their requests cannot say stale
//     is acceptable, and counts that go back in time when an operator asks
//     another node mislead. They need a leader.
//   - WaitResult starts with a read barrier on the leader, so a task
//     acknowledged anywhere is found; then it waits on that replica. DEAD
//     counts as finished, though RequeueDead may revive the task.
//   - The heartbeat batcher waits HeartbeatWindow (2 ms) after the first
//     heartbeat of a batch: latency nobody notices against leases of
//     seconds, for one Raft entry instead of thousands. A caller whose
//     context ended before the flush is dropped, so its leases are not
//     extended; each batch's proposal may run until the latest deadline of
//     its callers. A caller's bad item fails that caller only, because
//     items are validated before they join a batch.
//   - The coalescer never waits to fill a batch: a command is proposed at
//     once, alone, while fewer than CoalesceInflight entries are in flight;
//     only while all are in flight do commands queue, and the next free
//     slot takes all of them (up to CoalesceMax, 4 MiB and 65,536 task
//     positions) in one Batch. A lone caller's latency is unchanged, and
//     under load Raft, the log and the FSM do their per-entry work once
//     for many callers. Each caller is validated before it joins and gets
//     its own result, so one caller's stale fence fails it alone; a
//     whole-entry failure (not leader, leadership lost) reaches each caller
//     as it would have alone, and each retries or forwards on its own.
//   - Cluster changes (TransferLeadership, AddServer, RemoveServer) are
//     forwarded like writes, so an operator can point the CLI at any node.
//     Status always answers locally.
//   - A request that does not decode (a string field with invalid UTF-8,
//     truncated bytes) is the caller's fault, but gRPC decodes before any
//     interceptor and calls every codec error Internal. The server's codec
//     (codec.go) records the failure against the message instead, and the
//     first interceptor, unary or a stream's RecvMsg, answers
//     InvalidArgument before a handler sees it. Carrying text fields as
//     bytes and checking UTF-8 in Validate would change every Go type that
//     holds a queue, tenant or id; the codec changes nothing else.
//   - Health: the overall service and docket.v1.Cluster are SERVING while
//     the process runs; docket.v1.Queue is NOT_SERVING while no leader is
//     known (checked every HealthInterval); all turn NOT_SERVING when Stop
//     begins.
package transport
