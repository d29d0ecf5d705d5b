// Package cluster runs one Docket server: hashicorp/raft with raft-boltdb/v2
// as the fsync'd log and stable store (checksummed by checkedStore, behind
// raft.NewLogCache), a file
// snapshot store, a TCP NetworkTransport, and the fsm package as the state
// machine. It owns what only a running server knows: who leads, the leader's
// clock, and the leader-only loops (reaper, delayed mover, retention purge)
// that turn time into commands.
//
// Boot: the FSM is persistent, so Raft is told not to restore the snapshot
// on start; bootRestore restores it only when Pebble's applied index is
// behind the newest snapshot. Raft then replays the log above its last
// snapshot and the FSM skips what it already holds.
//
// Membership (discovery.go, reconcile.go, leave.go, gossip/): every server
// gossips its id, addresses, version and FeatureLevel over memberlist;
// BootstrapExpect forms the first configuration from gossip members, the
// peer book (leader hints, gRPC addresses, gossip addresses to rejoin
// with) is fed from gossip, and the leader reconciles gossip into the Raft
// configuration. See "# Membership" below.
//
// # The write and read paths (service.go)
//
// A Node embeds a Service: what the API layer (transport) calls, so that
// transport needs neither fsm nor storage. It owns request defaults and
// checks (requests.go), group commit (groupcommit.go), long-poll Claims and
// WaitResults (claim.go, waiters.go, over the FSM's one observer slot) and
// reads at a chosen Consistency (reads.go). It sits over a replica: the
// Node's Raft (propose.go's apply), or a MemNode's apply-at-once in tests
// of the layers above, so those tests run this code, not a copy of it.
//
// One Claim, from the CLI to Pebble and back, with the file of each hop:
//
//  1. cmd/docket/verbs.go: `docket claim` calls client.Claim.
//  2. client/queue.go, client/call.go: the call, with retries by error
//     class, to a node's gRPC port.
//  3. transport/server.go: the unary interceptor (refuses while the node is
//     unchecked, maps errors once on the way out).
//  4. transport/claim.go: the handler; cluster/requests.go fills the
//     defaults and Service.Check validates, once, on this node; the long
//     poll takes a slot (transport/limits.go).
//  5. transport/forward.go: onLeader runs it here, or re-issues it on the
//     leader (from step 3 there).
//  6. cluster/claim.go: Service.Claim watches the queue (waiters.go),
//     reads the catalog count (fsm/counts.go, storage/meta.go) and
//     reserves what it may take (claimGate); with nothing to take it
//     sleeps until an applied batch's Event wakes it.
//  7. cluster/groupcommit.go: ProposeOrphan joins concurrent commands
//     into one Batch entry (coalescer goroutine, then a flush goroutine).
//  8. cluster/propose.go: Node.apply stamps time and tenant limits,
//     encodes with the proposer's checksum (fsm/codec.go, fsm/checksum.go)
//     and hands it to raft.ApplyLog; a goroutine waits on the future so
//     the caller's ctx can end the wait.
//  9. Raft replicates and commits, then calls fsm/fsm.go ApplyBatch on
//     every node: checksum, txn.go, rules_batch.go and rules_work.go claim,
//     storage's keys and typed writes, one Pebble batch; the observer gets
//     the Event with the pending counts (no Pebble read).
//  10. Back up: the future's answer to the flush, its slice to the caller,
//     the tasks to transport/claim.go, which answers and, if gRPC fails
//     to send it, releases them (claimWatch, Service.ReleaseTasks).
//
// That is 6 packages and about 24 files, each package entered once on the
// way down (cmd → client → transport → cluster → fsm → storage) and left
// once on the way up. Before the seam moved it was the same 6 packages and
// about 25 files, but the data went transport → fsm (Validate, Counts) →
// transport (gate, coalescer) → cluster → fsm → back up through cluster
// into transport, and apply called up into transport's observer. There
// are 3 goroutine hand-offs besides Raft's own (coalescer, flush, future
// wait), as before.
//
// Decisions for the Service:
//
//   - Group commit without a timer: a command is proposed at once, alone,
//     while fewer than CoalesceInflight (4) entries are in flight; only
//     while all are in flight do commands queue, and the next free slot
//     takes all of them (up to CoalesceMax, 4 MiB and 65,536 task
//     positions) in one Batch. A lone caller's latency is unchanged, and
//     under load Raft, the log and the FSM do their per-entry work once for
//     many callers. Each caller gets its own result, so one caller's stale
//     fence fails it alone; a whole-entry failure (not leader, leadership
//     lost) reaches each caller as it would have alone. Heartbeats go
//     through the same group commit in a lane of their own with one entry
//     in flight (HeartbeatInflight), and adjacent ones merge into one
//     Heartbeat command: under load they wait for the entry in flight and
//     go together, which is what the separate batcher's 2 ms window did,
//     without the timer. As plain Batch members in the shared lane they
//     lost a third of their throughput (BENCHMARKS.md).
//   - Requests are checked where they arrive, with times judged by that
//     node's clock: a follower refuses a bad one without a hop, naming the
//     caller's field path (tasks[3].queue, items[1].fence), and a run_at
//     too far ahead costs no Raft entry. A forwarded request is checked
//     again on the leader: the forwarded mark is a header any client can
//     set until nodes prove who they are (mutual TLS), and a request that
//     skipped the check would cost a replicated entry, or be stored past
//     the leader's own limits, since the FSM holds only the ceiling. Apply
//     does not check before proposing; the FSM judges every command in
//     apply against the stamped time, and that check is the rule.
//     Before, a Claim was validated up to four times (the receiving node,
//     the leader after a forward, Propose, the FSM); now twice, three
//     times when forwarded.
//   - A waiting Claim proposes only when the leader's replica shows a task
//     it could take, so idle workers cost no Raft entries. An event wakes
//     only as many of a queue's waiters, oldest first, as there are pending
//     tasks not reserved by claims in flight (claimGate), and only those
//     propose; the count read and the reservation happen under one lock.
//     A claim that finishes, and a woken waiter that leaves without
//     claiming, wake the next ones if unreserved tasks remain. A claim
//     counts as reserved from admit until its caller has the answer, so
//     for a moment after it applies its tasks count twice (gone from the
//     replica, still reserved). A claim whose wait is over (or that has
//     none) and finds nothing free while others hold reservations waits
//     for their next release, at most maxSettle (250 ms), and looks again:
//     answering empty on that count gave the items of one ClaimBatch,
//     which all claim at once, nothing while tasks were pending.
//   - The observer runs on Raft's apply goroutine and reads no Pebble: the
//     FSM's Event carries each queue's pending count at the end of the
//     batch (Test_ObserverReadsNoPebble). A claimer that wakes its
//     successors reads the catalog itself, on its own goroutine. A
//     restore's event (fsm.Event.Restored) wakes every waiter of the node:
//     it cannot say which queues or tasks changed, each waiter looks again,
//     and restores are rare.
//   - WaitResult starts with a read barrier on the leader, so a task
//     acknowledged anywhere is found; then it waits on that replica. DEAD
//     counts as finished, though RequeueDead may revive the task.
//   - An undelivered claim is released, not reaped: when the leader knows
//     a Claim's answer did not reach its caller (ctx ended before or as
//     the claim applied; transport saw gRPC fail to send it), it counts
//     the tasks (docket_cluster_claim_undelivered_tasks_total,
//     leader-local) and proposes a Release of their (id, fence) pairs: the
//     FSM puts each task still running under exactly that fence back at
//     its old place, without counting an attempt. Safe because the fence
//     is the claim's log index and only the lost answer carried it. Where
//     the leader cannot know, the lease expires and the reaper counts an
//     attempt. Charging no attempt at reap time for tasks never
//     heartbeated was rejected: a poison task that crashes workers before
//     their first heartbeat would never dead-letter. A Claim whose result
//     is owed to a release waits for its entry's outcome (bounded by
//     Raft), not for its caller's deadline.
//   - Orphans (orphans.go): the node that saw a claim's answer go
//     undelivered remembers its (id, fence) in a FIFO set of the newest
//     1,024, and forgets those the Release put back. Service.Orphaned names
//     the listed tasks still running under such a claim (the release
//     failed or is in flight), which ListTasks answers and the dashboard's
//     Live leases page highlights. Node-local, not replicated: only that
//     node knew the answer was lost, and a wrong guess would cost a
//     replicated entry per claim. So a new leader knows none, and a claim
//     forwarded through a follower that then failed to answer is known to
//     that follower only (its release fails there too, as not leader, so
//     the lease expires); the page shows what the leader knows.
//   - Who sees which fence is decided once, in auth.go: TaskFor (GetTask,
//     WaitResult, ListDead) and ListedTaskFor (ListTasks). The current
//     claim's fence (the task's, and its open attempt's) reaches no token
//     holder and no listing; ended attempts' fences reach admins of the
//     task's tenant only, since they are history that every Submit would
//     refuse as stale, and an operator matches them against a worker's
//     side effects. With auth off GetTask hides nothing, as it did.
//   - docket_lease_expirations_total{reason} is replicated: the FSM counts
//     reaps (expired) and releases (released) in the queues' totals, and
//     the collector sums them over every queue.
//   - Drain (called by a stopping server) ends every long poll with an
//     empty answer at once; close (Node shutdown) also waits for the
//     proposals the Service started for callers who left.
//   - Its metrics moved with it and are named for it:
//     docket_cluster_coalesced_commands, _waiters,
//     _claim_undelivered_tasks_total and _claim_released_tasks_total were
//     docket_transport_*; docket_transport_heartbeat_batch_items is gone
//     with the heartbeat batcher (heartbeats count in coalesced_commands).
//
// Log integrity (logsum.go, logfault.go): raft.db is read and written
// through checkedStore, which sits under raft.NewLogCache and over BoltDB.
// Every stored entry carries a CRC-32C over its index, term, type, append
// time, data and extensions (in front of its Extensions); every stable
// value (CurrentTerm, LastVoteTerm, LastVoteCand, the format marker) one
// over its key and value. GetLog, which serves apply, replication and
// Raft's scans, returns an error wrapping ErrRaftStoreCorrupt instead of a
// damaged entry. The leader proposes each command with its own CRC-32C in
// raft.Log.Extensions (fsm.CommandExtension), which Raft replicates with
// the entry: StoreLogs checks it before storing, on the leader and on each
// follower, and the FSM checks it again before applying.
//
// What happens on damage:
//
//   - At start, openRaftStores checks the stable values and reads the whole
//     log through its checksums (and checks that it has no gap and no term
//     beyond the current one). New then fails with ErrRaftStoreCorrupt,
//     naming raft.db and the entry or key: the node never joins with it.
//   - While running, a damaged read (GetLog or a stable Get) or an entry
//     failing its proposer's checksum at apply logs an Error with the file
//     and index and sets Node.LogFault. The node then hands leadership over
//     if it leads and shuts its Raft down: it neither leads, votes nor
//     replicates; HealthProblems includes it, so the gRPC health answers
//     NOT_SERVING. The others carry on with their good copies.
//   - Raft itself panics when GetLog fails in its apply path on a follower
//     (processLogs) and in NewRaft's configuration scan; the start-up scan
//     runs first so a damaged file is refused with an error, not a panic,
//     and at run time the entry is usually in the LogCache. A leader whose
//     GetLog fails while replicating only logs it and retries, which is why
//     checkedStore reports the fault itself.
//   - A follower refuses (StoreLogs fails) a batch whose command fails its
//     proposer's checksum; Raft answers the leader with a failure and never
//     applies it. A leader refuses its own damaged proposal the same way and
//     steps down; the proposal fails.
//
// Log stores (walstore.go, --log-store). raft-boltdb/v2's raft.db is the
// default, as the project chose; hashicorp/raft-wal (what Consul defaults
// to for new clusters) is the opt-in `wal`. BoltDB commits an append with
// two fdatasyncs (data pages, then the meta page), raft-wal with one, and
// the leader's log write sits on every write's path, so wal shortens the
// Raft round (BENCHMARKS.md). Decisions:
//
//   - The same checksums sit over both: raft-wal checks its frames only
//     when it recovers the tail segment, and its stable values live in an
//     unchecksummed BoltDB meta file. One corruption story for both.
//   - A data dir keeps the store it was born with: a node that finds the
//     other store's files (raft.db or raft-wal/) refuses to start with
//     ErrLogStoreMismatch. Starting on an empty store would forget the term
//     and vote. To move a node: remove it, wipe its data dir, start it with
//     the other store and let it rejoin (the steps below); one node at a
//     time, and the cluster may mix stores meanwhile, since the log store
//     is local to a node.
//   - checkedStore passes raft-wal's IsMonotonic on: raft-wal refuses a gap
//     in the log, so Raft must empty it after restoring a user snapshot
//     (docket snapshot restore leaves a one-entry gap otherwise).
//   - raft-wal is v0.4.2 or later: v0.4.0 sealed a truncated tail segment
//     without its index block, so a node killed after Raft cleared its log
//     suffix could not reopen its log (raft-wal #31); its Close also left
//     the meta file flock'd.
//
// Cluster identity (identity.go, gossip/identity.go). The first leader at
// feature level 14 proposes SetClusterID with a random id; apply keeps the
// first, so the id is the same on every replica and never changes. A node
// compares it with a peer's on each Raft connection (ALPN
// "docket-raft/<id>" in the TLS handshake: no change to Raft's bytes, so
// older builds, which offer no ALPN, still connect), on gossip (the id in
// the member's meta, checked by memberlist's alive and merge delegates)
// and on calls between nodes (docket-cluster metadata). A peer naming
// another id is refused and logged with both; a side without an id (an
// empty node before it has the log, an older build) passes, as etcd's
// members do before they learn the cluster id.
//
// Log byte budget (logbytes.go, --log-max-bytes, default 512 MiB). Raft
// snapshots by entry count (16384) and keeps TrailingLogs (10240) entries
// after a snapshot, which says nothing about bytes: with 1 MiB payloads, or
// the leader's coalesced entries of hundreds of KiB under load, the log
// grows to many GiB. The checked store counts each entry's bytes as it
// writes, reads at start and deletes them (no extra reads), and a node
// loop lowers TrailingLogs through raft.ReloadConfig to the newest entries
// that fit in a quarter of the budget (never below 64, never above the
// configured count) and takes a snapshot once the log is over the budget.
// Trade-off: a follower that falls further behind than those entries
// catches up by a snapshot instead of the log.
//
// Repairing a node whose log is damaged (New failed with
// ErrRaftStoreCorrupt, or LogFault is set): the other servers hold good
// copies, so rebuild it from them.
//
//  1. Stop it and remove it from the configuration on the leader
//     (Cluster.RemoveServer with its id). A wiped server that came back
//     under its old id without this would have forgotten its vote, and
//     could vote twice in one term.
//  2. Wipe its whole data dir: raft.db, snapshots/, fsm/, peers.json.
//     Never delete only raft.db and keep fsm/: Pebble would then be ahead
//     of a log that no longer explains it.
//  3. Start it with --join; it is added back as a new server (or
//     Cluster.AddServer), and the leader sends it a snapshot and the log.
//
// If a majority is damaged there is no good copy to follow: restore the
// newest good snapshot into fresh data dirs and bootstrap from it.
//
// Consistency check (checker.go, after CockroachDB's): the leader proposes
// a Check entry when it wins and every CheckInterval (default 1m). Each
// node's FSM commits its apply batch at the Check and hands out a Pebble
// snapshot of exactly that index; the node hashes it on another goroutine.
// The leader asks every voter for its hash at the index (Cluster.Status
// with check_index) and, once a majority agrees, records that hash with a
// CheckResult entry. A node that applies the result and finds its own hash
// different is diverged: it goes NOT_SERVING, refuses the Queue API with
// Unavailable (reason NOT_SERVING), hands leadership over if it leads,
// shuts its Raft down (so it never leads or votes again), writes a DIVERGED
// file into its data dir, and waits for repair. A node that starts from
// existing data is NOT_SERVING and refuses the Queue API until a check
// passes on it; the leader runs one as soon as it sees such a voter (it
// gossips Meta.Unchecked) or when it wins itself.
//
// The hash is paced (CheckRate, default 8 MiB/s of keys and values, read
// in 1 MiB chunks from the Pebble snapshot, the FSM's lock held per chunk
// only): at full speed every node hashed a million-task keyspace at once
// each minute, 4 s of a core each, and claims at that backlog queued
// behind it (p99 2.3-3.3x the empty queue's; the arithmetic is at
// Config.CheckRate). A check that someone waits on runs at full speed on
// every voter: a new leader's first and one a restarted voter asks for.
// The leader says so in the entry (CheckCmd.urgent), because in a
// five-node cluster the leader's and the restarted node's hashes are no
// majority and a third voter's paced hash would keep the restarted node
// out of service for most of a minute; a build without the field paces
// it. A node awaiting a check always hashes at full speed. CheckTimeout
// counts from the end of the leader's own hash, so a keyspace larger than
// CheckRate x CheckTimeout is still checked. After a check that took d the
// next periodic one waits at least 3d (nextCheckWait): with CheckInterval
// alone a million tasks kept the voters hashing 44 % of the time, and
// claims ran slower for all of it.
//
// # Repair of a diverged node
//
//  1. Read why: `docket cluster status` against the node shows the check
//     index and both hashes, and the DIVERGED file repeats them.
//  2. Stop the node and move its whole data dir away (keep it for a
//     post-mortem of the disk). The node refuses to start while DIVERGED
//     is there.
//  3. Remove it from the configuration (`docket cluster remove ID`,
//     Cluster.RemoveServer on the leader), then start it with an empty data dir and --join, as for a
//     damaged log above: a wiped voter that came back under its old id
//     without the removal has forgotten its vote and could vote twice in
//     one term. The leader sends it a snapshot and the log; it serves once
//     the next check passes.
//
// # Recovery from the loss of a majority
//
// An operator writes RecoveryFile (recover.go) into each survivor's data
// dir; at start the node runs raft.RecoverCluster with that configuration
// before Raft starts, then renames the file. RecoverCluster replays every
// entry of the local log into the FSM, committed or not, so the survivors
// may keep writes the lost majority never acknowledged (never lose ones
// it did, as long as one survivor holds them). The file must list the node
// itself. Test_RecoverAfterMajorityLoss.
//
// # Feature levels and the gate
//
// A command type an older server does not know must not enter the log
// while such a server is in the configuration: it would stop there (fsm's
// feature levels). Every server announces the level its build applies
// (Status's feature_level today; gossip metadata once memberlist lands),
// and the peer book keeps the last announcement of each, so a server that
// is down now still counts at the level it last announced, and one never
// heard from counts as 0. The leader (after its Barrier, then every
// latchInterval) latches the lowest level over the whole configuration,
// voters and non-voters, with a SetFeatureLevel entry. The Service's one
// proposing path (features.go, Service.apply) refuses a command above the
// latch with *FeatureError (FailedPrecondition, FEATURE_DISABLED, naming
// the level): nothing is proposed, unless every server in the
// configuration already announced the level, when the command waits (up
// to latchWaitMax) for the latch that is on its way: a new cluster's first
// commands would otherwise fail as if a server ran an old build. Group
// commit degrades instead of
// refusing: while Batch is not latched, the commands a Batch would carry
// (and SubmitBatch's) go as entries of their own, concurrently, so Raft
// still shares appends. The consistency check waits for its level, and
// the bootstrap token for the token level. A latch is never undone: a
// server on a build below it that joins later stops at its first entry of
// the newer level and says which level it needs.
//
// # Decisions and trade-offs
//
//   - Checksums are CRC-32C (hardware-accelerated; what Pebble and etcd's
//     WAL use): any burst of up to 32 bits is caught, other damage escapes
//     with probability 2^-32. The cost is two CRC passes over the data per
//     store (the proposer's check, the seal) and one per read from disk.
//     BenchmarkLogSumCPU on the shared 2-core VM (2026-11-22): 5.4 us to
//     check and seal a 64 KiB entry, 2.8 us to verify it on read, about
//     0.1 us at 256 B. That is about 1% of BoltDB's StoreLogs for 32 such
//     entries (median 18 ms without fsync), and about a quarter of a 64 KiB
//     GetLog from disk (9 us), which only catch-up replication and the
//     start-up scan pay: recent entries come from the LogCache.
//     BenchmarkLogStore compares the stores directly, but on that box its
//     fsync and disk noise (3-7x spread in 5 interleaved runs) hid it.
//   - A raft.db from a build before checksums is adopted, not refused: the
//     first start seals its term and vote and writes the format marker
//     (DocketLogFormat) with the last index then in the log. Entries up to
//     that index read unchecked until compaction removes them (after
//     SnapshotThreshold + TrailingLogs more entries); everything after is
//     checked, and an entry past it without a checksum is damage. A marker
//     that goes missing while entries carry checksums is damage too.
//   - Commands with no Extensions are accepted: Raft's own entries, and a
//     rolling upgrade's older leader, which proposes without a checksum.
//     Any other Extensions must carry the checksum. The store-level CRC
//     covers such entries on disk.
//   - A leader with an entry damaged in its memory after StoreLogs (in the
//     LogCache) keeps sending it and followers keep refusing it: the log
//     stalls without data damage until that leader is replaced. Followers
//     log the refusal once per index.
//   - BoltDB has no page checksums. A flip in a branch page or the
//     freelist may make bbolt panic or fault; the start-up scan turns that
//     into ErrRaftStoreCorrupt. A flip in one of bbolt's two meta pages
//     makes it fall back to the previous transaction: the last append is
//     silently lost on that node, as after a crash before its fsync.
//     The stable values' cross-checks (vote within the current term, no
//     entry beyond it) catch some such rollbacks, not all. Worse, a flip
//     in a branch or leaf page can make a stable key unfindable: Get says
//     "not found", which checkedStore cannot tell from a vote never cast,
//     so a node could forget its vote and vote twice in a term after a
//     restart (seen about once in 40 runs of
//     Test_LogSum_RandomFlipsAreDetectedOrHarmless). Not fixed yet: the
//     cure is a sealed record of which stable keys exist, or the stable
//     store moving out of BoltDB (raft-wal keeps it in a checksummed file).
//   - hashicorp/raft-wal's verifier (rolling checksums compared across
//     replicas) is not used yet; the per-entry checks above stop a bad read
//     where it happens, and the periodic keyspace consistency check covers
//     divergence across replicas.
//   - Timeouts are tuned for a LAN (Config documents each): a leader crash
//     is followed by a new leader in roughly 0.5-1.5 s.
//   - A proposal waits for the FSM's answer; BatchApplyCh lets concurrent
//     proposals share one append and fsync, and the Service's group commit
//     lets them share one entry: the two throughput levers.
//   - A new leader runs a Barrier, then waits ReapGrace before reaping, so a
//     worker whose heartbeat was lost in the failover can retry it.
//   - ReadBarrier uses VerifyLeader plus waiting for the apply index instead
//     of a Barrier entry, so linearizable reads cost a heartbeat round, not
//     an fsync.
//   - Shutdown transfers leadership but does not leave the configuration: a
//     rolling restart keeps quorum size stable.
//   - Raft's listener is bounded: NetworkTransport runs over limitedStream,
//     a TCP StreamLayer whose listener (connlimit) closes inbound
//     connections past RaftMaxConns at accept, so a flood of connections to
//     the Raft port cannot take the descriptors Pebble and raft.db need
//     (issue 9). The price: while such a flood holds every slot, a peer
//     that needs a new connection is refused too and replication to this
//     node stalls until it ends. Mutual TLS on Raft (Config.TLS, below)
//     keeps outsiders from speaking Raft, not from taking slots: its
//     handshake deadline only shortens how long each one holds. Outgoing
//     connections are not counted; `docket agent` keeps them inside its
//     descriptor reserve. memberlist's TCP listener is not wrapped yet and
//     its UDP packets have no rate bound (see # Membership).
//   - Consistency checks hash every key, nothing excluded (m/applied and
//     m/now agree at the check index by construction). One hash runs at a
//     time per node; a Check that arrives while one runs is skipped there,
//     so that node has no verdict for it and the next check covers it.
//   - A diverged node is repaired by wipe and rejoin, not by rebuilding
//     itself from a snapshot in place: the snapshot would come from the
//     leader over InstallSnapshot anyway, and doing it by hand keeps the
//     damaged disk for a post-mortem and the decision with an operator.
//     A corrupt Pebble MANIFEST cannot be refused at open: Pebble v2.1.7
//     stops replaying the MANIFEST at the first bad record and opens
//     without error (version_set.go, load: IsInvalidRecord => break), and
//     no option changes that; only a damaged first record fails the open
//     ("malformed manifest"). The check is what catches the rest.
//   - A restarted node refuses service until checked, because the damage
//     above is silent: a stale read, or a leader's answer, from a keyspace
//     that lost tasks says NotFound for acknowledged work. A new leader
//     checks first thing, so a full-cluster restart is unavailable for
//     about one hash of the keyspace.
//   - New command types (Check, CheckResult) are proposed only once every
//     voter has answered a Status with a consistency section, remembered
//     in peers.json: an older build would stop on the unknown type. This is
//     not yet the log-latched feature switch DESIGN.md asks for; a voter
//     added later with an older build is only protected if it is seen
//     before the next check.
//   - The leader waits at most CheckTimeout for hashes and records nothing
//     without a majority, so too few live voters, or voters that all
//     disagree, stop nobody (the error is logged).
//   - NewBareRaft (bare.go) builds Raft from a Config exactly as New does
//     (same raft.Config, stores, LogCache, transport) over a caller's FSM,
//     so `docket bench` measures the Raft ceiling with the node's own
//     wiring rather than a copy that could drift from it.
//
// # Membership
//
// Discovery: a node binds gossip (Config.GossipAddr) and joins the pool
// through Join, or, restarted, through the gossip addresses its peer book
// remembers; a node alone retries every 500 ms, a node in a pool retries
// its configuration's servers that gossip lost every 5 s (memberlist stops
// probing the dead, so a healed partition needs the nudge). With
// BootstrapExpect N the first N alive members by id bootstrap together
// once N gossip and none announces it holds a configuration
// (Meta.HasState); a member that sees one waits to be added. Joining needs
// no RPC and no token: being in the pool is what admits a server, so the
// gossip key is the membership credential (Config.JoinToken is no longer
// used).
//
// The leader's reconcile (reconcile.go) runs after its Barrier, on every
// gossip event and every ReconcileInterval. decide is a pure function of
// the configuration, the members, the non-voters' health and now, with
// these rules (raft-autopilot's and Consul's leader loop, restated):
//
//  1. An alive member outside the configuration is added as a non-voter.
//     If a server of the configuration holds its Raft address (a wiped
//     server back under a new id), that server is removed first.
//  2. A non-voter is promoted once it has been healthy for
//     ServerStabilizationTime: alive, in the leader's term, and applied
//     within MaxTrailingLogs of the leader's last index (sampled with
//     Cluster.Status over gRPC each round; one bad sample restarts the
//     clock).
//  3. A server that announced a leave (Meta.Leaving, then memberlist's
//     leave) is removed at once. A plain stop announces nothing: the
//     server stays, so a rolling restart never shrinks the cluster.
//  4. A server failed in gossip, or absent from it, for DeadServerTimeout
//     is removed, oldest failure first, only while at least MinQuorum
//     voters remain; one that still answers Cluster.Status over gRPC is
//     alive (a build from before gossip, mid-upgrade), never removed.
//  5. At most (voters-1)/2 voters are removed in one round, and a round
//     that removes a voter promotes nobody.
//  6. The leader never removes itself: Leave hands leadership over first.
//
// Leave (Node.Leave; docket cluster leave; Shutdown with LeaveOnTerminate):
// transfer leadership if leading, announce the leave on gossip, wait until
// the new configuration without this server reaches it, then stop.
//
// Decisions and trade-offs:
//
//   - Health is sampled over gRPC (Status: term, applied index), as
//     raft-autopilot asks each server, because hashicorp/raft does not
//     expose a follower's match index to the leader. The cost: one Status
//     per non-voter and per server gossip shows failed, each round.
//   - Leaves and failures are told apart by our own Meta.Leaving,
//     announced before memberlist's leave: memberlist v0.5.4 hands
//     NotifyLeave a node whose State is not updated (the state lives in
//     its private nodeState), so "left" could not be read from it.
//   - Left voters are not bound by MinQuorum (the operator asked), but are
//     by the per-round cap; so a 2-voter cluster cannot shrink by a leave
//     (cap 0): remove by hand.
//   - Absent-from-gossip counts as failed from when this leader first
//     missed it, so a server that died before the current leader joined
//     the pool is still cleaned up, one DeadServerTimeout after the
//     election.
//   - A server an operator removed (docket cluster remove) is not added
//     back for 30 s (operatorRemoveHold) while gossip shows it alive as it
//     was before the remove: a server stopped just before its remove is
//     still alive to gossip for a few seconds, and was added straight back
//     (Test_CLITour failed on it under load). A restart after the remove is
//     added at once; a live server removed by mistake comes back after the
//     hold, as Consul's does without force-leave: stop it first, or have it
//     leave. The hold is leader-local: a new leader has none, and by then
//     gossip knows.
//   - A leaving server (Leave) waits until its configuration drops it or a
//     peer that knows a leader no longer lists it: the leader stops
//     replicating to it once it appends the new configuration, so the
//     leaver may never store that entry and would wait for ever.
//   - Without a gossip key anyone who reaches the gossip port joins the
//     pool and is added as a non-voter; with Raft TLS it still receives
//     nothing and is never promoted (its Status never shows the leader's
//     term), but it sits in the configuration. A gossip key keeps it out.
//   - The gossip listener is not wrapped by connlimit: memberlist owns its
//     TCP listener and UDP socket, so issue 9's bound does not cover it yet.
//
// # TLS (tlsstream.go, certs/)
//
// With Config.TLS (a certs.Reloader; `docket agent --tls-ca --tls-cert
// --tls-key`) Raft runs mutual TLS and the node's own gRPC calls to other
// nodes (non-voter health, consistency checks) dial with its
// certificate; without it everything is plain TCP, as before.
//
//   - Only a server certificate of the cluster CA speaks Raft, both ways:
//     it must name certs.ServerName ("server.docket") and allow ServerAuth.
//     A client certificate from the same CA (a worker's) fails the
//     handshake, as does one of another CA, an expired one, none, or plain
//     TCP, so a forged AppendEntries never reaches Raft's decoder and a
//     rogue agent cannot join (its Status polls and AddServer fail too).
//     Checking a name, not the address dialled, is Consul's
//     verify_server_hostname: addresses change, certificates need not.
//   - TLS 1.3 only; every client we ship is Go.
//   - The handshake of an inbound Raft connection runs on its first read,
//     in Raft's per-connection goroutine, under RaftHandshakeTimeout (5 s):
//     in Accept a silent connection would block every other accept, and
//     without a deadline it would hold its connlimit slot for ever. The
//     slot is counted before the handshake, so a flood of half-open TLS
//     connections is bounded like any other.
//   - Reload (SIGHUP) swaps the certificate, key and CA for new
//     handshakes; Raft's pooled connections keep theirs until they are
//     redialled. A set that fails to load keeps the old one.
//   - Gossip does not run TLS: memberlist encrypts and authenticates with
//     its keyring (AES-GCM, Config.GossipKeys) instead; see cluster/gossip.
//
// # Disk full and stuck apply (health.go)
//
//   - HealthProblems is what transport's health reports: the node answers
//     NOT_SERVING while (a) its last Raft log append failed (until one
//     succeeds), (b) Pebble reported a background error (until a flush or
//     compaction succeeds with no error for 1 s after it, or 30 s pass
//     without one), (c) Pebble has stalled writes for longer than
//     ApplyLagBound, or (d) an entry this node knows to be committed has
//     waited longer than ApplyLagBound (default 5 s) to be applied. (d) is
//     time, not entries: a count bound would flag a healthy node under a
//     burst and miss one stuck with a short backlog. A node replaying or
//     restoring far behind also trips it, which is honest: its local reads
//     are stale. Pebble's DiskSlow is logged, not a health problem: slow is
//     not broken, and a write that never finishes shows up as (c) or (d).
//   - A full disk makes Pebble fail every flush and retry at once (tens of
//     thousands of times a second), and then stall Commit, so the apply
//     goroutine blocks rather than panics. Each failure is logged when it
//     starts, every 30 s while it lasts (with a repeat count) and when it
//     ends; Pebble's own logging of each background error is replaced.
//   - A leader whose log append fails steps down (raft's dispatchLogs
//     answers the append's futures with the error and becomes follower).
//     The logGuard above the LogCache tags that error ErrLogWrite, because
//     the LogCache flattens the disk's error to text. Propose answers it as
//     ErrLeadershipLost (Unavailable, LEADERSHIP_LOST), not not-leader: the
//     entries were never sent to a follower, but a BoltDB commit that
//     failed in its final fsync may have reached the disk, and a node that
//     restarts with that entry could still be elected and commit it. So the
//     outcome is unknown; the client retries the calls that are safe to
//     repeat, as after any lost leadership.
//   - A leader whose apply is stuck (its Pebble cannot flush) answers no
//     Propose, yet Raft keeps it leader: its heartbeats go on, and once
//     its apply queue (128 batches) is full its main loop blocks, so the
//     cluster takes no write until that disk is freed. When apply stays
//     stuck for ApplyLagBound, the leader asks Raft to transfer
//     leadership; if that fails and apply made no progress meanwhile, it
//     shuts its Raft down (not waiting: that waits for the apply) so the
//     others elect, and stays NOT_SERVING until restarted. A lone voter
//     stays up: no one else could lead, and it recovers by itself once
//     there is space. A node replaying a long log after an election makes
//     progress, so it is not shut down.
//   - On a real disk Pebble panics when a WAL append fails (its
//     commitWrite), so a node whose Pebble fills may stop rather than
//     stall, depending on whether the WAL or a flush meets the full disk
//     first. Either way the ballast is the way back.
//   - The ballast (Config.BallastBytes, ballast.go) is for the operator:
//     the node creates it at start when missing and the disk has room for
//     it twice over, and never deletes it itself. Deleting it on ENOSPC
//     would delay the same stop by a few seconds of writes, turn health
//     back to SERVING over a disk that is still filling, and leave the
//     operator nothing to free when the node stops again. Whoever fixes
//     the cause (grows the volume, purges a tenant) deletes it to get the
//     node going, and the next start recreates it once there is room.
//
// # Queue control (queuectl.go)
//
//   - Pause, resume and purge are commands of feature level 7
//     (fsm.LevelQueueControl), refused with ErrFeatureDisabled until
//     every server announced it. A long poll on a paused queue waits as
//     on an empty one: claimable reads the flag (one Get) before anything
//     is proposed, so a paused queue
//     costs no Raft entries; resume's Event wakes the waiters.
//   - A purge runs as commands of at most fsm.MaxBatch tasks, until one
//     deletes fewer, so no single apply holds the apply goroutine for a
//     million deletes. It is not atomic: tasks enqueued meanwhile may go
//     too, and a purge cut short by an error says how far it got.
//
// # Recurring tasks (schedule.go)
//
//   - The scheduler is a leader-only loop like the reaper
//     (Config.ScheduleInterval, 250ms): it reads every schedule of the
//     local replica after the leadership barrier, so it sees what earlier
//     leaders fired, and proposes FIRE for the slots fsm.DueSlots picks at
//     its clock. It starts proposing only once LevelSchedules is latched.
//     It keeps no state of its own: whatever it proposes twice (a round
//     that overlaps a slow commit, a new leader that did not see the old
//     one's last entry) the FSM refuses, so correctness never rests on
//     the loop or on clocks agreeing. A slow or skewed clock delays or
//     advances firing; it cannot duplicate or (under CATCH_UP, within its
//     bound) drop a slot.
//   - Slots of one schedule are proposed one after another, oldest
//     first, stopping at the first error: a newer slot applied first
//     would make the older one ALREADY_DONE, a silent gap. Different
//     schedules go in parallel (16 in flight), so one slow commit does
//     not hold every schedule back. At most 4096 slots per round.
//   - PutSchedule and RemoveSchedule need the producer role (or admin)
//     over the tenant; ListSchedules producer, reader or admin. A
//     schedule enqueues tasks in the tenant's name, which is exactly what
//     a producer may do; making it admin-only would push teams to hand
//     out admin tokens to services that only enqueue.
//
// # Retries (retries.go)
//
//   - SetQueueRetry (and its reset), Snooze and UpdateTask are commands
//     of feature level 12 (fsm.LevelRetries), refused with
//     ErrFeatureDisabled until every server announced it. The backoff
//     itself is the FSM's, computed from the stamped now at apply; cluster
//     only builds the commands. A task's own policy on an Enqueue before
//     the latch is accepted and not stored (the FSM's rule), so a
//     producer needs no version check of its own.
//   - ListDead without a queue lists every queue of the tenant (the FSM
//     walks the catalog); ListTasks still needs a queue, because the
//     keyspace has no per-tenant index of the other states.
//   - Roles: a queue's policy and its reset are queue control (admin over
//     the tenant); Snooze is a worker's, like Nack; UpdateTask a
//     producer's or an admin's of the tenant: whoever may enqueue a task
//     may move it while it waits. Cancel stays admin-only, as before.
//
// # Cancelling running work and timeouts (cancel.go)
//
//   - Cancel keeps its RPC and its role (admin over the task's tenant):
//     from feature level 9 the FSM marks a running task instead of
//     refusing it, so no new method, and the worker learns of it from the
//     Heartbeat answer it already polls (ItemResult.cancel_requested), not
//     from a push channel the leader would have to hold per worker.
//   - The leader's "timeout" loop runs at ReapInterval after the same
//     ReapGrace as the reaper: it scans o/ (fsm.PastDeadlines) and
//     proposes TimeOut with (id, fence) pairs, which the FSM re-checks. It
//     proposes nothing until level 9 is latched (no claim has a deadline
//     before). A deadline is thus enforced within ReapInterval of the
//     leader's clock, and a new leader whose clock runs ahead by less than
//     the grace cannot end a claim early.
//   - An Enqueue with a timeout is refused FEATURE_DISABLED until the
//     level is latched (fsm.CommandLevel counts the field), so an older
//     server never meets a field it would drop.
//
// # Limits (queuelimits.go)
//
//   - SetQueueLimits is a command of feature level 10 (fsm.LevelLimits).
//     The FSM enforces the limits at claim; this package only keeps long
//     polls from proposing claims they would leave empty. claimable asks
//     fsm.ClaimAllowance (pause, concurrency, tenant limit, tokens: three
//     Gets on a Pebble snapshot) and caps the pending count with it, so
//     the claim gate reserves no more than the limits allow. Before, a
//     waiting claim on a queue at its limit saw pending tasks, proposed,
//     got nothing and looked again: hundreds of empty entries a second
//     (Test_ConcurrencyLimitedLongPoll, Test_RateLimitedLongPoll).
//   - Wake-ups: a running task's end names its queue in the FSM's Event
//     when tasks wait there; under a tenant limit, Event.Freed names the
//     tenant and one waiter of each of the tenant's waiting queues looks
//     (the event carries no counts of the other queues, and the observer
//     reads no Pebble). An empty bucket gives its waiters a timer at the
//     next token's time (the next-visible path delayed tasks use), taken
//     from the leader's clock; the FSM's own time is used when later.
//
// # Authentication and authorization (auth.go)
//
//   - One role table, methodRoles, decides which roles allow a method:
//     producer (Enqueue, GetTask, WaitResult), worker (Claim, Heartbeat,
//     Submit, SubmitBatch, Nack), reader (Stats, GetTask), admin (the
//     Cluster service, tokens, the DLQ, Cancel, and queue control:
//     PauseQueue, ResumeQueue, PurgeQueue, SetQueueLimits). A method missing from
//     it is refused to every token. Roles cover the token's tenants; a
//     call naming no tenant (the Cluster service, token management,
//     RequeueDead by id) needs its role over "*", so an admin of one
//     tenant cannot move leadership or mint tokens. Stats without a
//     tenant is answered with the token's tenants only.
//   - Queue control needs admin over the queue's tenant, not a new role:
//     it acts on a whole queue as RequeueDead and ListDead do, and a
//     tenant's own admin may stop or empty that tenant's queues. A
//     separate "operator" role would grant nothing admin does not, and
//     every token holder would need to learn it.
//   - ParentResults (task dependencies) is allowed to worker, producer
//     and reader over the task's tenant: the child's worker is who needs
//     its parents' results, and GetTask is not a worker's method. It
//     shows each parent's state, outcome, result and error, never its
//     payload or fence. An Enqueue with parents needs no new role, only
//     fsm.LevelDependencies latched (fsm.CommandLevel says so, and the
//     gate above refuses it with ErrFeatureDisabled before).
//   - SetQueueLimits is admin too: over the queue's tenant for a queue's
//     limits, as queue control; over every tenant for a tenant's own
//     limit (transport names no tenant for it). That limit bounds what the
//     tenant takes from the cluster, so the tenant's own admin must not be
//     able to lift it.
//   - Cluster.Status needs no token even with auth on (OpenMethod):
//     nodes call it on each other for non-voter health and consistency
//     checks, and have no token of their own before TLS gives them an
//     identity; it tells the cluster's shape and hashes, no tenant data.
//     Consul's /v1/status endpoints take no ACL token for the same reason.
//     This is a deviation from "every Cluster RPC needs a token"; with
//     node certificates (the TLS work) it can require one.
//   - Authenticate reads the local replica, at once: a quorum round per
//     call would double the cost of every RPC. The window this leaves: a
//     revoked token is accepted by a lagging follower until it applies
//     the revoke, for what that follower answers alone (stale GetTask).
//     Everything else a follower forwards, with the caller's token, and
//     the leader checks it again against its replica, which applied the
//     revoke before it was acknowledged. A new token may likewise be
//     unknown on a lagging follower (a node wiped and rejoining lags for
//     seconds); the follower does not refuse it (ErrUnknownToken) but
//     answers NOT_LEADER with the leader's address, and the client asks
//     the leader, whose answer is final. Expiry is judged by the serving
//     node's clock, so clock skew moves it by that much.
//   - The bootstrap token (Config.BootstrapSecret) is created by the
//     first leader that has a secret, right after its leadership barrier,
//     once in the cluster's life (the FSM latches it): later boots log
//     that they ignore it. A leader that loses leadership before the
//     create commits logs the error; the next leader tries again.
//   - The leader mints accessors and secrets (crypto/rand: 12 and 32
//     bytes); only the SHA-256 of a secret enters the log. A plain hash
//     is enough for 256-bit random secrets (no dictionary to attack); a
//     slow hash would cost every RPC.
//   - A node joins by gossip, not by AddServer, so it needs no token:
//     the gossip key admits it (# Membership). AddServer, RemoveServer and
//     Leave still need admin over "*".
package cluster
