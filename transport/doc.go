// Package transport is Docket's gRPC server: the docket.v1.Queue and
// docket.v1.Cluster services, the gRPC health service and (when asked)
// server reflection, over one cluster member. It owns the wire and nothing else:
// handlers, forwarding to the leader, the mapping of errors to gRPC
// statuses, bounds on connections and long polls, and health. It imports
// only cluster and proto; what a request does is cluster's (group commit,
// long polls, reads at a consistency) and the FSM's (the rules).
//
// The story of a request: any node accepts it. A write (Enqueue, Claim,
// ClaimBatch, Heartbeat, Submit, SubmitBatch, Nack, Cancel, RequeueDead,
// PauseQueue, ResumeQueue, PurgeQueue, PutSchedule, RemoveSchedule,
// SetQueueRetry, ResetQueue, Snooze, UpdateTask, SetQueueLimits) is turned
// into a Command by cluster, which fills the request's defaults (an empty tenant becomes
// "default", Claim's max_tasks and lease get theirs), and checked with
// Node.Check on the node that received it, so a bad value costs no hop and
// names its field. On the leader the handler hands the command to
// Node.Propose (or Node.Claim, which long-polls); the FSM's answer becomes
// the response. On a follower the same RPC is re-issued on the leader over
// a cached connection, marked "docket-forwarded: 1" so it is forwarded at
// most once and not checked again. Reads of task state are linearizable
// (cluster.Linearizable on the leader, forwarded from followers) unless
// GetTask says allow_stale (cluster.Stale, on the node asked).
//
// Files: config.go (the Node interface, Config), server.go (NewServer,
// Serve, Stop, the interceptor, health), errors.go (toStatus), forward.go
// (onLeader), queue.go (writes and reads), queuectl.go (PauseQueue,
// ResumeQueue, PurgeQueue), schedule.go (PutSchedule, ListSchedules,
// RemoveSchedule), retries.go (SetQueueRetry, ResetQueue, Snooze,
// UpdateTask), deps.go (ParentResults), queuelimits.go (SetQueueLimits),
// claim.go (Claim, WaitResult and claimWatch), claimbatch.go (ClaimBatch),
// admin.go (the Cluster service), limits.go (connection and long-poll
// bounds), codec.go (requests that do not decode), metrics.go.
//
// Every error is mapped to a gRPC status in one place, toStatus, called by
// the server's unary interceptor, which also puts the leader's address in
// the "docket-leader" header and trailer of every answer. The codes,
// ErrorInfo reasons (domain docket.dev) and metadata keys are the API the
// Go client branches on:
//
//	request does not decode        InvalidArgument (invalid UTF-8, bad wire bytes)
//	*cluster.FieldError            InvalidArgument + BadRequest naming the field
//	  oversize (cluster.IsTooLarge) ResourceExhausted + BadRequest
//	cluster.ErrNotFound            NotFound
//	cluster.ErrStaleFence          FailedPrecondition, reason STALE_FENCE
//	cluster.ErrFeatureDisabled     FailedPrecondition, reason FEATURE_DISABLED
//	cluster.ErrWrongState          FailedPrecondition, reason WRONG_STATE
//	cluster.ErrTimedOut            FailedPrecondition, reason TIMED_OUT (a claim past its execution deadline)
//	cluster.ErrTenantLimit         ResourceExhausted, reason TENANT_LIMIT
//	                               (an Enqueue whose every item the FSM refused)
//	cluster.ErrLeadershipLost      Unavailable, reason LEADERSHIP_LOST (outcome unknown)
//	cluster.ErrNotLeader           Unavailable, reason NOT_LEADER (+ docket-leader)
//	cluster.ErrShutdown            Unavailable, reason SHUTTING_DOWN
//	ErrOverloaded                  Unavailable, reason OVERLOADED (nothing done; retry later)
//	context deadline, cancel       DeadlineExceeded, Canceled
//	anything else                  Internal (logged)
//
// # Decisions and trade-offs
//
//   - TLS is opt-in (Config.TLS, a cluster/certs Reloader; `docket agent
//     --tls-*`). The API presents the node's server certificate, which
//     names 127.0.0.1, localhost and server.docket plus what `docket tls
//     cert` was given, so a client checks it against the address it dials.
//     Client certificates are required, checked if given (the default:
//     tokens authenticate clients without one) or not asked for
//     (Config.ClientAuth). Forwarding dials the leader with the node's own
//     certificate and accepts only a server certificate of the cluster CA,
//     so it passes a leader that requires client certificates. Both read
//     the Reloader per handshake: a SIGHUP reaches new connections, while
//     the forwarder's cached connection keeps its certificate until it
//     reconnects.
//   - Reflection is off unless Config.Reflection (`docket agent
//     --reflection`): it lists every service and message to whoever
//     connects, and no client of ours needs it.
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
//   - The long poll runs on the leader, forwarded whole: the leader's
//     replica is the freshest, and its observer sees every enqueue first.
//     How it waits is cluster's (Service.Claim).
//   - Stats, ListDead and ListTasks are linearizable: their requests cannot say stale
//     is acceptable, and counts that go back in time when an operator asks
//     another node mislead. They need a leader.
//   - Answers are bounded by the FSM (fsm.AnswerBudget per Claim, per
//     ListDead, ListTasks and Stats page; one task at most fsm.MaxTaskBytes), so the
//     largest answer of any RPC is a number, MaxAnswerBytes (49 MiB; the
//     arithmetic is at its declaration). The server's send limit and the
//     Go client's receive limit are that number. The server's receive
//     limit (MaxRecvMsgSize, 8 MiB) bounds requests, not answers.
//   - An undelivered claim is released, not reaped (cluster.Service.Release
//     holds the reasoning). transport's part is claimWatch: a gRPC stats
//     handler that sees a Claim or ClaimBatch whose answer gRPC failed to
//     send and hands its tasks back to the node (ReleaseTasks). An answer lost after gRPC
//     wrote it to the connection is not seen; its leases expire.
//   - ClaimBatch (for the Go client, which lets concurrent Claims share an
//     RPC) adds no Raft command and no feature level: each item is the
//     ordinary Claim command, checked as Claim's is, and all run at once
//     through Node.Claim, so the node's group commit folds them into
//     shared entries exactly as it folds concurrent Claims of many
//     clients. A new command would have needed a latch for rolling
//     upgrades and bought nothing the coalescer does not already do. It
//     never long-polls (wait_ns > 0 is InvalidArgument): a batch that
//     waited would hold every item's caller for the slowest, and would
//     need a long-poll slot; the client long-polls a claimer that found
//     nothing on its own Claim. Bounds: 1,000 items, max_tasks adding up
//     to 1,000, so one call claims no more than one Claim may. Each item's
//     answer is bounded (fsm.AnswerBudget, or one larger task), but a
//     thousand are not; the handler measures the encoded answer and, past
//     MaxAnswerBytes, answers the items from the first that does not fit
//     to the end empty and releases their tasks (ReleaseTasks, no attempt
//     counted). The first item always fits (MaxAnswerBytes holds one
//     Claim's answer). If an item fails, the others' tasks are released
//     and the call fails as a Claim would; a not-leader error after some
//     items claimed is LEADERSHIP_LOST, not forwarded, since forwarding
//     promises nothing was done. claimWatch releases every item's tasks
//     when gRPC fails to send the answer.
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
//   - What an outsider without a token can make a node hold or compute is
//     bounded on its own (connguard.go, handshake.go, hashcache.go): a
//     connection that has made no authenticated call is closed after
//     UnprovenTimeout; such connections are at most MaxUnprovenPerIP per
//     address and MaxUnproven in all (the oldest of the address holding
//     most makes room); an address's calls on them are paced at
//     UnprovenCallRate; TLS handshakes compute in MaxHandshakes slots,
//     held only while computing; Cluster.Status with_hash needs an
//     admin or reader token over every tenant with auth on, and computes
//     at most one hash per HashInterval whoever asks. Proven connections
//     (a token, a client certificate of the cluster CA) are not touched,
//     so clients and other nodes never meet these bounds.
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
//   - Auth (auth.go, Config.Auth, off by default in this round): one
//     unary and stream interceptor, after the codec and before the
//     handler, reads "authorization: Bearer <secret>", asks cluster for
//     the token (local replica) and for each tenant the request names
//     (cluster.Authorize). Codes: Unauthenticated for no, unknown,
//     revoked or expired token; PermissionDenied for a valid token whose
//     roles or tenants do not cover the call; NotFound for another
//     tenant's task, with the same message as a missing id, never
//     PermissionDenied, so ids do not leak existence. Health,
//     reflection and Cluster.Status stay open (cluster/doc.go says why).
//   - With auth on, an empty tenant in a request that names a task is
//     filled with the default tenant before the handler, so the FSM (for
//     Submit, Heartbeat, Nack, Cancel) and the reads (GetTask,
//     WaitResult, compared in the handler) check it. WaitResult checks
//     the tenant before it waits: a wait on another tenant's task would
//     tell by its length that the id exists. With auth off the tenant
//     stays empty and nothing is checked, as before.
//   - With auth on, GetTask, WaitResult and ListDead never return the
//     current fence: only Claim's answer, to the worker holding the
//     claim, does. The fences of a task's ended attempts (Task.history)
//     go to admins of its tenant only. With auth off they still return
//     all, so existing tools and tests that read it keep working; anyone
//     can do anything there anyway. ListTasks (a reader's view of running
//     tasks, the dashboard's Live leases) drops the current fence for
//     every caller: nothing that reads it needs one. cluster.TaskFor and
//     ListedTaskFor hold the rule; this package only applies it. Claim
//     answers carry no history (the FSM leaves it out).
//   - ListTasks names the listed tasks that run under an orphaned claim
//     (orphaned_task_ids), from the serving leader's memory
//     (cluster.Service.Orphaned), asked before the fences are dropped.
//   - A follower forwards the caller's authorization metadata; the leader
//     checks it again, so a revoke the leader applied wins over a
//     follower that lags.
package transport
