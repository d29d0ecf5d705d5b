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
//	fsm.ErrTenantLimit         ResourceExhausted, reason TENANT_LIMIT
//	                           (an Enqueue whose every item the FSM refused)
//	cluster.ErrLeadershipLost  Unavailable, reason LEADERSHIP_LOST (outcome unknown)
//	cluster.ErrNotLeader       Unavailable, reason NOT_LEADER (+ docket-leader)
//	cluster.ErrShutdown        Unavailable, reason SHUTTING_DOWN
//	ErrOverloaded              Unavailable, reason OVERLOADED (nothing done; retry later)
//	context deadline, cancel   DeadlineExceeded, Canceled
//	anything else              Internal (logged)
//
// # Decisions and trade-offs
//
//   - While the node's consistency checks do not let it serve (diverged,
//     or awaiting a check after a restart; cluster.Node.CheckErr), every
//     Queue call is refused with Unavailable and reason NOT_SERVING, before
//     the handler runs, and health says NOT_SERVING overall. The Cluster
//     service, health and reflection stay open: operators and the leader's
//     check read Status from such a node.
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
//   - Answers are bounded by the FSM (fsm.AnswerBudget per Claim, per
//     ListDead and Stats page; one task at most fsm.MaxTaskBytes), so the
//     largest answer of any RPC is a number, MaxAnswerBytes (49 MiB; the
//     arithmetic is at its declaration). The server's send limit and the
//     Go client's receive limit are that number. The server's receive
//     limit (MaxRecvMsgSize, 8 MiB) bounds requests, not answers.
//   - An undelivered claim is released, not reaped. When the leader knows
//     a Claim's answer did not reach its caller (the caller's ctx ended
//     before or as the claim applied, or gRPC failed to send the answer:
//     claimWatch), it counts the tasks
//     (docket_transport_claim_undelivered_tasks_total, leader-local) and
//     proposes a Release of their (id, fence) pairs: the FSM puts each
//     task still running under exactly that fence back at its old place,
//     without counting an attempt. This is safe because the fence is the
//     claim's log index and only the lost answer carried it: no worker
//     can hold the lease, and a Submit with that fence would be stale.
//     Where the leader cannot know, the lease expires and the reaper
//     counts an attempt, as before: an answer lost after gRPC wrote it to
//     the connection, a client that refuses it (a receive limit smaller
//     than MaxAnswerBytes), a forwarded claim whose caller left after the
//     leader's answer reached the follower (earlier, the follower cancels
//     the forwarded call and the leader releases), a Release
//     that fails (leadership lost). Charging no attempt at reap time for
//     tasks never heartbeated was rejected: a poison task that crashes
//     workers before their first heartbeat would then never dead-letter.
//     A Claim whose result is owed to a release waits for its entry's
//     outcome (bounded by Raft), not for its caller's deadline.
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
//   - Bounded resources per connection and per node (limits.go; numbers
//     in Config): at most MaxConcurrentStreams calls in flight on a
//     connection (gRPC queues the rest), MaxLongPollsPerConn long polls on
//     one connection and MaxLongPolls on the node. Keepalive is enforced:
//     client pings are allowed every KeepaliveMinTime (5 s), streams or
//     not, so the Go client's 10 s pings keep an idle connection up; the
//     server pings a silent peer after 1 min and drops it 20 s later; a
//     connection without calls for MaxConnectionIdle (5 min) is closed.
//     The connection count itself is bounded below gRPC, by the listener
//     `docket agent` wraps (cluster/connlimit).
//   - A long poll past its bound is refused at once with Unavailable,
//     reason OVERLOADED, not ResourceExhausted: the Go client already
//     retries Unavailable with backoff, and ResourceExhausted is our
//     answer for an oversize field, which must not be retried. A refusal
//     beats queueing the poll: the caller learns at once and may try
//     another node (a follower forwards it).
//   - Long polls are counted by the peer address of their connection, on
//     entry, rather than by a stats handler that would run on every call.
//     A call a follower forwarded counts in the leader's total only: all of
//     a follower's forwarded calls share one connection, and the follower
//     counted them per connection already.
//   - Health: docket.v1.Cluster is SERVING while the process runs; the
//     overall service too, unless the node reports HealthProblems (its log
//     cannot be written, Pebble fails, apply is stuck), which make both it
//     and docket.v1.Queue NOT_SERVING: a node that cannot write or apply
//     is not live in any useful sense. docket.v1.Queue is also NOT_SERVING
//     while no leader is known (checked every HealthInterval). All turn
//     NOT_SERVING when Stop begins.
package transport
