// Package fsm is Docket's pure core: the deterministic state machine that
// every node runs. It takes Raft log entries holding Commands, decides the
// queue's rules, and writes the outcome into one Pebble batch per apply
// batch, together with the applied index.
//
// The story of a command: the leader stamps it with its time and proposes
// it; every replica's ApplyBatch decodes it (an undecodable entry or unknown
// type stops the node, since skipping it would diverge), validates it again
// with Validate (a bad value is an answer that changes nothing), and runs one
// rule function over an indexed batch: enqueue, claim, heartbeat, submit,
// nack, cancel, reap, promoteDelayed, purge, requeueDead, setQueuePaused,
// purgeQueue, putSchedule, removeSchedule, fireSchedule, setQueueRetry,
// snooze, updateTask, timeOut. Each rule moves a
// purgeQueue (and, inside enqueue and every move to an end, the task
// dependencies of rules_deps.go). Each rule moves a
// purgeQueue, setQueueLimits. Each rule moves a
// task between keyspace indexes only through txn.move, which keeps the
// counters and the one-index-per-task invariant.
//
// Apply reads nothing but the command, the entry's index and Pebble: no
// clock, no randomness, no map order, no goroutines. Time is max(last now,
// cmd.now). Ids come from the entry index and position. The fencing token of
// a claim is the index of its entry.
//
// # What fsm owns, and what storage owns
//
// fsm owns the rules and their dispatch (txn, rules_*, Validate), apply
// (ApplyBatch, the applied index and now, the checksum and Check entries),
// the snapshot's lifetime against Raft (Snapshot, Persist, when Restore may
// close the database), the idempotency filter (idem.go: memory over the
// keyspace, no I/O) and the read API over the live keyspace. storage owns
// every key's encoding and the typed reads and writes, and all the I/O
// around the keyspace: opening Pebble and its tuning (OpenDB), the
// directory with its durable creation and the restore swap (Home), and
// Pebble's event listener and logger. Options keeps its fields; the
// Pebble ones pass through to storage.DBOptions, and OnDiskEvent gets
// storage's DiskEvent.
//
// fsm's non-test files import no os, read no clock and start no goroutine;
// cmd/docket's layout test (Test_LayoutFSMIsPure) checks it.
//
// A Batch entry carries client commands that the leader coalesced: each runs
// as its own entry would, at the batch's index and time, in order, with its
// own result. Each command gets its own range of task positions
// (Positions), so ids and pending seqs of different callers never collide
// and FIFO follows the order of the commands.
//
// # Decisions and trade-offs
//
//   - Feature levels (features.go) version what the log may hold. Each
//     command type belongs to a level; a build applies every level up to
//     FeatureLevel (or a lower one linked in with -ldflags -X
//     github.com/dockethq/docket/fsm.levelOverride=N, the stand-in for an
//     older build). SetFeatureLevel latches the cluster's level in
//     m/feature: it only rises, it is hashed like every key, and it is
//     what the leader gates proposals on. A build that meets an entry of a
//     level above its own, or a latch above it, panics before applying
//     anything of it, naming the level it needs (the proposer appends the
//     level to the entry's Extensions, after the checksum). The FSM does
//     not refuse a command of a known type whose level is not latched: the
//     leader's gate keeps such commands out, and every build that knows the
//     type applies it the same, so refusing would only add a rule.
//     Any change to the bytes an existing command writes needs a new level
//     too, with its migration at the latch's index.
//   - Each command entry carries its proposer's CRC-32C of Data in
//     raft.Log.Extensions (checksum.go). ApplyBatch checks every entry of a
//     batch before applying any: the entries before a damaged one apply, the
//     damaged one and all later never do. The FSM then records LogFault,
//     answers every later entry with it and refuses snapshots, because
//     Raft would label a snapshot with an index the keyspace never reached.
//     It does not panic, unlike an undecodable entry, so the node can stay
//     up and report NOT_SERVING while cluster shuts its Raft down. A command
//     without Extensions (an older leader's, during a rolling upgrade)
//     applies unchecked.
//   - A Check entry (consistency check, cluster/checker.go) ends its apply
//     batch: the batch commits at the Check's index and a registered Pebble
//     snapshot of that state goes to the check observer, which hashes it on
//     its own goroutine. One extra batch commit per check is the whole cost
//     on the apply goroutine. A CheckResult changes nothing; it is accepted
//     (and reported to the observer) only for an earlier index. The hash
//     covers every key: nothing in the keyspace may legitimately differ.
//   - Pebble writes use NoSync: the fsync'd Raft log is the durable source,
//     and entries above the stored applied index are replayed on boot.
//   - A claim promotes the queue's due delayed tasks itself, so a delayed
//     task is claimable at exactly its time; the leader's mover exists for
//     waking long-polls and keeping Stats current, not for correctness.
//   - Submit(FAILED) is terminal: the worker says retrying is pointless.
//     Nack is the retry path; it counts an attempt, and at max attempts the
//     task becomes a dead letter that RequeueDead can replay.
//   - Cancel applies to pending and delayed tasks only. A running task's
//     worker owns it until its lease ends.
//   - Dead letters are kept until replayed or, from LevelRetries on,
//     until their expiry (below).
//   - Cancel ends pending and delayed tasks. Before LevelCancelRunning a
//     running task's worker owns it until its lease ends (WRONG_STATE);
//     from the latch on, see "Cancelling running work" below.
//   - Dead letters are kept until replayed; they have no retention.
//   - The payload limit is configurable at the edge; the FSM re-checks with
//     a fixed ceiling (PayloadCeiling) so replicas never disagree because of
//     node configuration.
//   - A bad value is a *FieldError naming its field; its Reason is text for
//     people, and nothing branches on its words. "Too large" (payload,
//     result, progress over the limit: ResourceExhausted on the wire) is
//     the FieldError's TooLarge, set by the validator, kept by InList
//     when the field is named inside a list, and carried by a
//     CommandResult as error_too_large, so a rejection by the FSM itself
//     keeps its type (ResultError rebuilds it). Answers are not stored, so
//     the field changes no keyspace. A listing's bad cursor (storage's
//     ErrBadCursor) becomes a FieldError on "cursor" at the read API
//     (cursor.go), the one door to storage's reads that callers above use.
//   - An indexed batch costs more per write than a plain one, but a claim
//     later in the same apply batch must see an enqueue earlier in it.
//   - A catalog record is written only when a command changed it, so a
//     claim that finds nothing writes only the applied index. "Changed" is
//     per command, not a value comparison, so the keyspace is the same
//     however Raft groups entries into apply batches.
//   - Raft persists a snapshot on its own goroutine, after waiting on its
//     main loop, which may itself wait for a Restore. So Restore and Close
//     wait only for a snapshot already streaming, close those not yet
//     streaming, and let their Persist fail; Raft takes a new one.
//   - Nothing in fsm exits the process. A fatal apply error (an
//     undecodable entry, a Pebble write that fails) panics on the apply
//     goroutine, and Pebble's own fatal errors panic with a
//     *storage.FatalError; whoever runs the node decides what a panic
//     means. Before, Pebble's Fatalf called os.Exit from inside fsm.
//   - The I/O moved to storage without changing what it does: the same
//     tuning, directory layout (db, restore, old, RESTORE-COMPLETE) and
//     crash-safe swap, so a data directory of an older build opens as it
//     did. The metamorphic, crash-recovery and restore tests, unchanged,
//     are the proof.
//   - A Batch's commands share one fence: every task claimed in the entry
//     gets its index. Fences must increase per task, which they still do;
//     two tasks with one fence were already possible with max_tasks > 1.
//     A Batch validates only its shape; a bad command in it is answered
//     INVALID_ARGUMENT alone. A command type unknown to this build inside a
//     Batch stops the node, like one outside.
//   - A Claim's answer has a byte budget, AnswerBudget (4 MiB), a constant
//     of the FSM so that every replica takes the same tasks: the claim
//     stops before the task that would pass it and always takes one. A
//     Claim inside a Batch has its own budget, so callers sharing an entry
//     do not share a budget. Before, max_tasks alone bounded it: 425 tasks
//     of 1 MiB made one answer of 425 MiB that no client could receive,
//     and all 425 stayed RUNNING under a lease nobody held. MaxTaskBytes
//     bounds one record, so the largest answer of any RPC is known
//     (transport.MaxAnswerBytes has the arithmetic).
//   - Release (leader-proposed, with (id, fence) pairs) is the way back
//     for tasks whose claim answer never reached its caller: a task still
//     running under exactly that fence returns to pending at its old seq,
//     so it is the head again, with no attempt counted. A reap of the same
//     task counts one, because there a worker may have had it. Release is
//     a new command type; the cluster has no version gate yet, so a node
//     of an older build that meets one stops (DecodeCommand) rather than
//     diverge: upgrade every node before a leader of this build serves.
//   - Per-tenant limits: the leader stamps its configured limits into each
//     Enqueue (StampTenantLimits, like now), and the FSM checks every new
//     task against the stamped values and the tenant's counters in the
//     keyspace (u/<tenant>, kept by txn.write and purge), never against a
//     node's configuration. A task that would pass a limit is refused
//     alone, RESOURCE_EXHAUSTED, storing nothing; duplicates of an
//     idempotency key are answered before the check, so a retry of an
//     accepted task is never refused. Counted are task records in every
//     state until purged, since finished and dead tasks hold disk too,
//     and their encoded bytes (proto.Size, two per move). Cost, medians of
//     3 interleaved runs on a shared 2-core box: BenchmarkApplyBatch_Enqueue
//     +12% at batch 1 (one more Get and Set of u/ per apply batch), +3% at
//     64, +1.5% at 512; ClaimSubmit +7% at batch 1, within noise at 64 and
//     512. Batches are what a busy leader applies (coalescer). An older
//     leader stamps nothing: no limit. A mixed-version cluster is not
//     safe with limits on: a node of an older build ignores the stamped
//     field and would store what the others refuse; set limits only once
//     every node runs this build.
//   - A refusal carries no fence (item): a fence is shown only to the
//     worker holding the claim, and a STALE_FENCE answer also hides the
//     task's state and current fence from its detail. A stale writer
//     learns only that it is stale; one that retried with a fence it was
//     told would defeat fencing. Answers are not stored, so this changes
//     no keyspace.
//   - Time is bounded so that no stored time wraps: Validate refuses a
//     now past MaxTime (2200-01-01), every duration has its cap, and
//     run_at may be at most MaxDelay ahead, like delay_ns. The FSM judges
//     run_at at the time the command runs (a Batch's commands at the
//     batch's), and adds durations with addTime, which saturates rather
//     than wraps for a time inherited from an older keyspace. A tighter
//     check at apply is a change to what apply writes: a mixed-version
//     cluster whose old leader accepted such a run_at would diverge on it.
//     It needs hostile input during an upgrade, and the rolling-upgrade
//     latch (DESIGN.md) does not exist yet to gate it.
//   - Reads of more than one step (ListTasks, ExpiredLeases, Stats) use a
//     Pebble snapshot, so an apply between the steps cannot make them fail.
//   - Idempotency-key lookups ask an in-memory filter (idem.go) before
//     Pebble. Nearly every enqueue brings a new random key, and a miss is
//     Pebble's dearest Get: it walks both memtable skiplists, then seeks
//     into L6, whose bloom filters Get never reads. That was about half of
//     a follower's CPU under enqueue load. The filter is a multiset of
//     32-bit fingerprints of the live i/ keys: "absent" is certain and
//     skips Pebble; "maybe" asks Pebble, whose answer is the one used, so
//     no state or answer depends on the filter (replicas with it on, off
//     or overflowed agree). Enqueue adds a key it created, purge removes
//     one it deleted once the batch commits, and Open and Restore rebuild
//     it with a scan of the i/ range: 0.15 s per million keys, and the
//     scan leaves the i/ blocks in Pebble's cache (a node restarted with
//     1M keys measured 345 MiB RSS, against 269 without; the cache is
//     bounded, and a busy node fills it anyway).
//   - Why this shape: a Pebble-level fix cannot skip the memtables. An
//     iterator with UseL6Filters instead of Get saved about 12% in one
//     run; the filter halves the cost of an enqueue with a new key against
//     250k tasks (BenchmarkApplyBatch_EnqueueKeyed, 11.2 to 5.7 us at
//     batch 64). A counting Bloom filter costs about as much memory
//     for a 1% false-positive rate (n/2^32 here: 0.02% at 1M keys), its
//     counters saturate, and growing it needs the keys, which means a
//     Pebble scan on the apply goroutine; this table is an open-addressing
//     array of uint32 that resizes from its own fingerprints.
//   - The filter's memory: 4 bytes a slot, at most 3/4 full and half
//     full after a resize, so 5.3 to 8 bytes per live key (at most 8 MB at
//     1M keys), pointer-free so the GC does not scan it. It is bounded by
//     Options.IdemFilterBytes, 64 MiB by default: 10M keys take 51 to 64
//     MiB, and a resize briefly holds the old table too. Past 12.5M live
//     keys the filter switches itself off, so lookups cost what they did
//     before it, and a scan rebuilds it once the keys fit in half the
//     table.
//   - Tokens (rules_auth.go) are FSM state, so that a revoke takes effect
//     on every replica at its commit index and a snapshot carries them.
//     The record is keyed by the SHA-256 of the secret (k/h/<hash>:
//     authenticating a request is one Get), with an accessor index
//     (k/a/<accessor>) for list and revoke; the secret never enters the
//     log, a snapshot or a node's disk. The leader mints accessor and
//     secret; the FSM only checks the shape (known roles, tenants or "*",
//     a 32-byte hash) and refuses, at the command's time, a token whose
//     expiry is not after it. Expiry at use is cluster's check against
//     the serving node's clock; an expired token stays stored until it is
//     revoked (no purge yet). A bootstrap token is latched by
//     k/bootstrapped: created once in a cluster's life, so a leader that
//     proposes it again after a restart or an election changes nothing.
//     CREATE_TOKEN and REVOKE_TOKEN are new command types, and there is no
//     version gate yet (issue 12): a node of an older build that meets one
//     stops in DecodeCommand rather than diverge, so every node must run
//     this build before auth is used.
//   - The tenant re-check: Submit, Heartbeat, Nack and Cancel carry the
//     caller's tenant, and a task of another tenant is NOT_FOUND exactly
//     as a missing one (getTaskOf): no state, no fence, the same detail,
//     so a task id tells nothing about another tenant. An empty tenant
//     checks nothing (auth off, and every command of older leaders), so
//     existing logs apply as before.
//   - Attempt history (history.go, LevelAttempts = 6): from the latch on,
//     each claim appends a record to the task (claim number, worker,
//     fence, claimed_at, lease expiry as of the last heartbeat, ended_at,
//     outcome, error), and submit, nack, reap and release end it. The
//     record lives in the task (t/<id>), not under its own keys: the task
//     page reads one key, and purge removes it with the task. A task
//     keeps the last MaxHistory (16) attempts, errors cut to
//     MaxAttemptError (256) bytes on a rune boundary, so a full history
//     adds under 10 KiB to a record (MaxTaskBytes counts it); 16 covers
//     three times the default max_attempts. A claim made before the latch
//     gets no record, and its end adds none. Before the latch apply writes
//     exactly what a level-5 build writes (Test_HistoryWaitsForItsLevel).
//     Cost: each claim and heartbeat rewrites a record that is up to
//     10 KiB larger; a heartbeat also updates the open attempt's lease.
//     BenchmarkApplyBatch_ClaimHeartbeatSubmit_Level (one attempt per
//     task, batch 64, 3 interleaved runs of 3000 on a shared 2-core box):
//     medians 61 us at level 5 against 70 us at level 6 per task, inside
//     the runs' spread (54 to 87 us); 98 to 104 allocs and 7.9 to 8.6 KB
//     per task. A task with a long history costs more per rewrite.
//     Claim answers carry no history: the worker needs none, and it holds
//     past fences, which are for admins only (cluster.TaskFor decides who
//     sees which fence). The claim's answer budget still counts the stored
//     record, history included, so it errs on the side of fewer tasks.
//     Before level 9 no outcome says "cancelled": Cancel ended only tasks
//     no worker held.
//   - The same latch makes the catalog record version 3, which counts
//     releases (QueueTotals.released), so lease ends by reason (reaped,
//     released) are replicated state like the other totals.
//   - Queue control (rules_queue.go, LevelQueueControl = 7): a queue's
//     configuration is its own record (storage's g/), pb.QueueConfig, kept
//     only while some setting is away from its default. A paused queue's
//     Claim takes nothing and answers empty, not an error: workers need
//     no new case, and a long poll waits as on an empty queue (cluster
//     reads the flag before it proposes). Enqueue, Heartbeat, Submit and
//     Nack go on; the reaper still requeues expired leases into the
//     paused queue. Resume names the queue in the batch's Event with its
//     pending count, so those long polls wake. Pausing writes the queue's
//     catalog record (empty for a new queue), so Stats lists it paused.
//     Every claim reads the record (one Get; absent for nearly every
//     queue, which the bloom filters answer), whatever the latch: skipping
//     it before level 7 was latched would make a pause that applied
//     anyway (the FSM does not refuse an unlatched type) silently
//     ineffective.
//   - Cancelling running work (rules_cancel.go, LevelCancelRunning = 9):
//     Cancel of a running task marks it (Task.cancel_requested and _at,
//     the open attempt's cancel_requested_at) and answers OK with
//     cancel_requested and a detail saying so; a second Cancel is
//     ALREADY_DONE and changes nothing. The claim goes on: the worker
//     learns it from its next Heartbeat answer (ItemResult
//     .cancel_requested, the lease still extended, so a worker that winds
//     down slowly is not reaped meanwhile). However the claim ends, under
//     its fence, it ends CANCELLED, never requeued whatever attempts
//     remain, with the attempt CANCELLED and no attempt counted: Nack,
//     Submit, the reaper's lease expiry, the TimeOut, and a Release
//     (the claim's answer was lost, so nobody ran it; going back to
//     pending would undo the cancel). Below LevelCancelledOutcome a
//     Submit's outcome and result are kept on the record and the Submit is
//     answered OK; the same Submit again is ALREADY_DONE (endedBySubmit);
//     any other late write is STALE_FENCE. From LevelCancelledOutcome
//     (15) on, the worker is told: a Submit under the fence of the claim
//     Cancel reached is answered CODE_CANCELLED however that claim ended
//     (this Submit, an earlier one, a Nack, its lease or deadline;
//     cancelledClaim), keeps neither outcome nor result (its words go to
//     last_error), and every task that ends CANCELLED, pending or running
//     or by a parent's failure, gets outcome CANCELLED, so a WaitResult
//     reader never sees COMPLETED on a CANCELLED task. Only a Submit sets
//     COMPLETED or FAILED, which is what endedBySubmit reads. Below the
//     latch apply writes what a level-14 build writes
//     (Test_CancelledOutcomeWaitsForItsLevel). A claim's answer has
//     cancel_requested false:
//     Cancel of a task whose claim answer is in flight marks the
//     running task, so the worker's first heartbeat says it.
//   - The execution timeout: NewTask.timeout_ns (per task; no queue
//     default yet: that needs a configuration command and this level has
//     one command number), separate from the lease. A claim from the
//     latch on gets deadline_at = claimed_at + timeout_ns, on the task and
//     its attempt, and an index key o/<deadline_at>/<id> beside l/, kept
//     by txn.move like every index. A Heartbeat at or past the deadline
//     is refused CODE_TIMED_OUT and changes nothing, and so is one of a
//     claim that TimeOut (or a reap past the deadline) already ended, so
//     the worker hears the same cause whichever applied first
//     (timedOutClaim; before, it heard STALE_FENCE and reported a lost
//     lease); answers are not in the keyspace, so replicas of either
//     build stay identical. The leader scans o/
//     (PastDeadlines) and proposes TimeOut, which re-checks fence and
//     deadline: the task ends FAILED, attempt TIMED_OUT, last_error
//     saying so, outcome unset (no Submit ended it, so a late Submit is
//     STALE_FENCE, not ALREADY_DONE); with retry_on_timeout it is
//     requeued as a reap would be (an attempt counted, DEAD at
//     max_attempts); cancel-requested, CANCELLED. A Nack past the
//     deadline ends the claim exactly so (a worker cannot turn a FAILED
//     timeout into a retry by nacking). A Submit past the deadline is
//     accepted until TimeOut applies, as one after a lease expiry is
//     until the reap: its result is real work, and the deadline is the
//     leader's to enforce, within one reap interval.
//   - Before the latch apply writes what a level-7 build writes: the
//     new NewTask fields are dropped at enqueue (an older build drops
//     them too) and claims get no deadline (Test_CancelRunningWaitsFor
//     ItsLevel). The leader's gate (CommandLevel's fieldLevel) refuses
//     an Enqueue with a timeout until the level is latched, so the user
//     is told rather than the field silently lost. The rules read the
//     latched level (txn.feature), never the build's, so replicas agree
//     mid-upgrade.
//   - Limits (rules_limits.go, LevelLimits = 10). A queue's concurrency
//     limit (max_running) and rate limit (rate_milli, tasks per 1000 s,
//     and burst) live in its configuration record, g/, next to pause: a
//     claim reads that record anyway, so a limit costs it no new key. A
//     claim takes at most max_running - running (the catalog's count),
//     at most the tenant's limit - the tenant's running tasks, and at
//     most the bucket's whole tokens; a claim they leave none takes
//     nothing, writes nothing, and answers empty like a paused queue.
//   - The bucket is GCRA: its whole moving state is one time, rate_tat,
//     at or before which the bucket is full; taking n tokens moves it n
//     intervals (1e12/rate_milli ns, integer) later, and time refills it.
//     It is stored in the configuration record, not under its own key
//     (b/ stays unused): a claim that takes tasks from a rate-limited
//     queue rewrites that record (a few dozen bytes) instead of reading
//     and writing a second key, and Stats reads one record. Integers
//     only, bounded (rate at most 1e9, burst at most 1e6, so burst times
//     interval is at most 1e18 ns and now + that stays below 2^63), from
//     the stamped now: every replica takes the same tasks. A new rate or
//     burst refills the bucket; a burst of 0 means the rate per second,
//     at least 1. The integer interval rounds down, so a rate runs at
//     most a nanosecond per token fast.
//   - A tenant's concurrency limit is set at runtime by an admin of every
//     tenant (the same command with an empty queue), not stamped by the
//     leader like TenantLimits: users expect a record they change without
//     restarting agents, and a stamped value would differ per leader. It
//     lives in the tenant's usage record (u/, version 2 from the latch),
//     next to a count of the tenant's RUNNING tasks, which txn.write keeps
//     on every move to or from RUNNING: that record is read and written
//     per apply batch anyway, so counting costs 16 bytes per write and no
//     Get. At the latch the counts are set from the catalog's per-queue
//     running counts (stored and this batch's), so tasks running before
//     it count; a tenant limit set before the latch (the leader never
//     proposes one; the FSM does not refuse it) counts that tenant the
//     same way. Before the latch the record stays version 1, byte for
//     byte (Test_TenantRecordWaitsForItsLevel).
//   - Changing a limit announces the queue's pending tasks; a running
//     task's end announces its queue when tasks wait there, and under a
//     tenant limit names the tenant in Event.Freed, so long polls that a
//     limit held back look again. Events are not state: no keyspace
//     changes. Every claim reads the tenant's usage record whatever the
//     latch, like the pause flag, so a limit applied is a limit kept.
//   - PurgeQueue deletes a queue's pending and delayed tasks, or its dead
//     letters, up to limit (at most MaxBatch) per command; the caller
//     repeats until an answer has fewer items. It is not retention's
//     Purge, which selects finished tasks by expiry: the two share
//     txn.remove (record, index keys, idempotency key, counters). Running
//     tasks are their workers', finished ones retention's. A purged task's
//     id goes in Event.Finished, so its WaitResult wakes and finds it gone.
//   - A restore tells the observer (Event.Restored): the new keyspace may
//     hold claimable tasks and finished ones that no applied batch
//     announced, and without it long polls and WaitResult calls slept out
//     their wait. The event names nothing; cluster wakes every waiter.
//   - An apply that panics closes its Pebble batch on the way out, and a
//     purge fails its apply on any read error but not-found (the
//     idempotency key's owner): skipping the delete there would keep a key
//     that replicas whose read worked deleted.
//   - Cross-feature rules settled at merge: empty-queue removal looks
//     only at catalog records the current command wrote (metaEntry.touched,
//     reset per command), never at the batch-wide dirty mark, so what a
//     command leaves does not depend on how Raft grouped entries into
//     apply batches (Test_EmptyQueueDropIsPerCommand); a queue of WAITING
//     tasks is not empty; a Snooze, like a Nack, cannot requeue a
//     cancel-requested or timed-out claim; a Reap of a claim past its
//     execution deadline ends it by the timeout's rule, so the outcome does
//     not depend on whether the leader's Reap or TimeOut landed first.
//   - Apply clears a new task's fields of levels above the latch before it
//     validates (dropUnlatched): an older leader forwards them as unknown
//     fields that older replicas neither check nor apply, so refusing a
//     bad value here would diverge (Test_NewFieldsIgnoredBeforeTheirLevel).
//   - Split task records (LevelSplitRecords = 13, storage/taskrecord.go):
//     from the latch on, putTask writes a task's payload once (v/) and a
//     header without it (t/); the batch remembers each task's record
//     format (txn.formats) so a later write skips the body. Heartbeat,
//     submit, nack and reap read the header only (runningFor), so a
//     heartbeat of a 1 MiB task costs 554 WAL bytes and ~33 µs, not a
//     1 MiB rewrite (BenchmarkHeartbeat_Bytes). A record written before
//     the latch is split at its next write: the same index on every
//     replica, so the keyspace hash agrees. Tenant usage bytes still
//     count the whole task (header and payload) as before.
//   - Recurring tasks (rules_schedule.go, cronspec.go, LevelSchedules =
//     8): a schedule is its own record, s/<tenant>/<name> (pb.Schedule),
//     holding the spec, zone, task template, missed-slot policy and what
//     the FSM owns: last_slot, created_at, updated_at, fired. FIRE
//     enqueues one task that names its schedule and slot (Task fields
//     100-101) and sets last_slot. It is refused, changing nothing, for a
//     slot at or before last_slot (ALREADY_DONE), at or before updated_at
//     or after the command's time (WRONG_STATE), or that is no slot of
//     the spec (INVALID_ARGUMENT, an item answer because it depends on
//     the stored spec). So a slot is enqueued once whichever leader
//     proposes it, and a deposed leader's late entry or a clock that ran
//     ahead cannot add one; a clock that ran ahead can only fire a slot
//     early. Idempotency keys would not do: they expire with retention.
//     A replace keeps last_slot and moves updated_at, so neither a retry
//     of a put nor a changed spec fires slots of the past; a removed and
//     re-added schedule starts after its new put for the same reason.
//   - Which due slots to fire is the leader's choice (DueSlots, a pure
//     function the scheduler calls): SKIP the newest only, CATCH_UP the
//     newest catchup_max, oldest first. The FSM checks validity and
//     monotonicity, not the policy: a policy checked at apply would need
//     "all slots before this one", which is the leader's view of time.
//   - Slots are a pure function of (spec, zone, time). The parser is
//     robfig/cron v3's standard 5-field one plus descriptors; the zone is
//     set on the parsed spec explicitly (robfig leaves time.Local, which
//     follows the caller). @every D is anchored at the Unix epoch, so a
//     slot is a multiple of D and "is this a slot" needs no start time.
//     Zones come from tzdata/zoneinfo.zip embedded in fsm (IANA 2025c,
//     TZDataVersion), not time.LoadLocation, which reads the host's
//     zoneinfo before the embedded time/tzdata: replicas on hosts with
//     different tzdata would disagree on a slot. Replacing the file, or
//     upgrading robfig/cron, changes what apply decides and needs a new
//     feature level. At DST changes, robfig's rules hold: a wall time
//     that does not exist (02:30 on the spring-forward day in Berlin)
//     has no slot that day; one that happens twice fires twice, as two
//     distinct instants (Test_CronSpecNext).
//   - Bounds: MaxSchedules (1000) per tenant, counted with a range scan
//     at put (rare), so the leader's per-round read is bounded per
//     tenant; MaxCatchUp (100) slots per schedule per round; a spec of
//     MaxSpecLen (256). A fired task passes the stamped tenant limits
//     like an Enqueue; over them the slot stays unfired, so the next
//     round tries it again (or, under SKIP, a newer slot replaces it).
//   - Retries (rules_retries.go, LevelRetries = 12). A retry policy
//     (base, cap, integer multiplier, jitter percent) lives on the task
//     (NewTask.retry, stored in the record) or its queue (QueueConfig, set
//     by SetQueueRetry); the task's wins. Read at each failed attempt, so
//     a queue's new policy applies to the next failure of every task. A
//     nack that names its own delay keeps it: the worker knows best (a
//     Retry-After); only a nack without one, and every reap, wait out the
//     backoff. The jitter only shortens the delay (by up to jitter_percent),
//     its fraction an FNV-1a hash of (id, attempt): no randomness, the same
//     on every replica, spread across tasks that failed together. Before
//     the latch, nack and reap requeue at once and enqueue does not store
//     a task's policy, whatever the queue's record says: what a level-7
//     build writes.
//   - Snooze is a Nack that is not a failure: the fence holder gives the
//     task back for a delay, attempts unchanged, the attempt ends SNOOZED.
//     A worker that snoozes for ever keeps the task for ever; that is its
//     owner's choice, and the history shows it (16 attempts kept).
//   - UpdateTask changes a pending or delayed task only: a running one is
//     its worker's (the fence protects it), a finished one is history.
//     Refused with WRONG_STATE (FailedPrecondition), which callers branch
//     on. A changed task goes to the back of its (new) priority.
//   - A dead letter of LevelRetries gets an expiry: now + its queue's
//     dead_retention_ns, or DefaultDeadRetention (14 days), indexed in e/
//     beside the dead index, so retention's Purge removes it as it does a
//     finished task (txn.remove drops both keys). RequeueDead clears it.
//     Dead letters of earlier levels have no expiry and stay until
//     replayed or purged (PurgeQueue): no migration at the latch, which
//     would be one unbounded apply.
//   - An empty queue's catalog record (c/) goes once it holds no task in
//     any state and has no configuration (g/), checked at the end of each
//     command that wrote the record, so the keyspace does not depend on
//     batching. Its lifetime totals go with it: they are the totals of the
//     queue since it last held something, and a queue that only ever saw
//     finished tasks is removed only after their retention. Configuration
//     stays until SetQueueRetry's reset deletes the whole record (pause,
//     policy, retention, any later setting); a reset of a paused queue
//     resumes it. The command types were three (26-28) for the release:
//     reset rides on SetQueueRetry rather than a type of its own.
//   - Task dependencies (rules_deps.go, LevelDependencies = 11): an
//     Enqueue's task may name parents by id (after) or by the position of
//     an EARLIER task of the same command (after_index), so a whole DAG is
//     one command. An index at or after the task's own is refused, which
//     makes a cycle impossible to write: every edge points back in log
//     order, and a task named by id already existed. The whole command is
//     refused INVALID_ARGUMENT, naming the field, for a bad reference
//     (an index not before the task, too many parents) and for a parent
//     id that names no task of the task's tenant (unknown, purged, or
//     another tenant's, which reads exactly as unknown): one rule, the
//     request names something that cannot be a parent. So a DAG is stored
//     whole or not at all; only a tenant limit still refuses single
//     items, and then every task whose parent was refused is refused with
//     the parent's code (refusedParent), so no child is stored without
//     its parents. These are answers only: apply writes the same.
//   - A child with an unfinished parent is WAITING (q/<queue>/<tenant>/w/,
//     counted per queue in j/n/<queue>/<tenant> for Stats, so the catalog
//     record keeps its format). It keeps its parents' ids and how many are
//     unfinished; each parent gets a child index key j/c/<parent>/<child>
//     and counts its children, so a parent's end (txn.write's hook: every
//     move into COMPLETED, FAILED, CANCELLED or DEAD, whichever rule made
//     it) scans only its own children, and a task with none costs nothing.
//     COMPLETED counts down; FAILED, DEAD, CANCELLED, or a purge of the
//     queue that deletes an unfinished parent, cancels a child of policy
//     CANCEL (the default), whose end cancels its own children in turn,
//     and counts down for a child of policy RUN. Ended parents go on a
//     work list, not the stack. DEAD counts as the end though RequeueDead
//     may replay it: its children followed their policy when it died.
//     A child whose last parent ended becomes DELAYED at max(its run_at,
//     now), so due at once: a pending seq minted there could repeat one
//     that the entry's own command hands out (a reap's positions, say),
//     and equal seqs in a priority make a claim's head hint skip a task.
//     A claim promotes due delayed tasks itself; long polls wake at the
//     leader's next promote (250 ms).
//   - Parents already ended at enqueue count at once: COMPLETED, or a
//     failure under RUN; a failure under CANCEL stores the child CANCELLED.
//     Cancel now also ends a WAITING task (nothing else can reach that
//     state before the latch), dropping its child keys.
//   - A parent with a waiting child has not ended, so retention cannot
//     purge it; the child index never outlives its parent. A completed
//     task that retention purges leaves a tombstone j/t/<id> (its tenant)
//     with an expiry index j/e/<expire_at>/<id>, for one more retention of
//     the task; Purge deletes expired ones (HasDue says so). A parent
//     found only as a tombstone counts as COMPLETED; a purged parent that
//     did not complete, or whose tombstone expired, is unknown. The
//     cost: each purge of a completed task writes two more keys and later
//     deletes them, and the tombstones of one retention window take about
//     70 bytes a task.
//   - Below the latch apply ignores after, after_index and the policy, as
//     a build that does not know the fields does, so a mixed-version
//     cluster stays byte-identical (Test_DependenciesWaitForTheirLevel);
//     CommandLevel gives an Enqueue with parents level 11, so the leader's
//     gate refuses it until every server has the build. Bounds: MaxParents
//     (64) per task and MaxChildren (10,000) registered per parent, so one
//     parent's end visits at most that many children; a cascade through
//     many levels is bounded only by the tasks that wait.
//   - Pebble's background errors, write stalls and slow-disk reports go to
//     Options.OnDiskEvent (storage/events.go) without a time: the FSM has
//     no clock, so the node stamps them and decides what they mean for
//     health. A full disk blocks Commit in a write stall rather than
//     failing it; a WAL write that fails still panics the apply.
package fsm
