// Package jepsen is Docket's chaos harness, in the spirit of Jepsen: it
// runs real `docket agent` processes on their own network, drives a
// workload against them while a nemesis breaks the network, the processes
// and the clocks, records every operation, and then checks the history
// against what Docket promises (see DESIGN.md of the project, "What must
// hold under faults").
//
// # The network
//
// Each node runs in its own Linux network namespace with one veth leg
// plugged into a bridge that lives in a namespace of its own. The clients
// run in a control namespace on the same bridge. The test subnet
// (10.77.0.0/24) exists only inside these namespaces, none of which has a
// default route, so no packet leaves the machine and the root namespace
// never dials a test address: the controller (root namespace) re-executes
// this binary inside the control namespace for everything that talks to the
// cluster (the workload, and the "who leads?" question the nemesis asks).
// Every run takes a unique prefix (dj<6 hex>-), deletes the leftovers of
// earlier runs at start, and removes its namespaces, processes and mounts
// on every exit path, signals included.
//
// # The secure path
//
// A run is secure unless --insecure: before the agents start, the built
// binary's `docket tls ca` and `docket tls cert` (as an operator would,
// README "Run it securely") write a CA, a server certificate per node
// that also names its test address, and one client certificate; the
// bootstrap admin secret and a gossip key (`docket gossip keygen`) go to
// 0600 files. Each agent runs with --tls-ca/--tls-cert/--tls-key,
// --tls-client-auth require, --auth, --bootstrap-token-file and
// --gossip-key-file, and DOCKET_TOKEN (the bootstrap secret) in its
// environment, the join token a wiped node shows to AddServer. Once a
// leader has created the bootstrap token, `docket token create` in the
// control namespace makes a producer, a worker and a reader token over
// the workload's tenant (Tenant). Each client gets files, never secrets,
// on its command line, and only the roles it uses: producers enqueue with
// the producer token, workers claim, heartbeat, nack and submit with the
// worker token, readers read with the reader token, and the leader and
// health helpers hold the admin token (TransferLeadership needs it).
// Before it starts, the workload checks that the nodes enforce tokens: a
// claim with the producer token, an enqueue with the worker token and a
// read without a token must each be refused, or the run fails (a secure
// run against nodes that take any call would test the plain path).
// Leader-targeted windows say whether the leader lookup found the leader,
// and a corrupted node that never served names its last health answer,
// so a helper that cannot handshake shows in the report.
//
// # The workload
//
// Producers enqueue with their own idempotency keys (the key is also the
// payload) and retry a key whose outcome is unknown. Workers claim one task
// at a time under a 2 s lease, heartbeat every lease/4, sometimes stall for
// two leases without heartbeating or nack, then write to a downstream
// Register under their fence (it refuses a fence older than the newest it
// has accepted) and Submit under the same fence, whether or not they still
// hold the lease. After the final heal, a drain phase claims and completes
// whatever is left; then every node is asked for its applied index and
// keyspace hash until they agree. Every request has a deadline and every
// loop a count bound.
//
// # The history and the checkers
//
// history.jsonl holds invoke/ok/fail/info events stamped with
// CLOCK_MONOTONIC, which all processes share, so the controller's fault
// windows and the workload's operations merge on one time line. Checkers
// are pure functions of the parsed History, each naming the tasks and
// events that broke it: lost, unexpected, double-completion,
// stale-accepted, fences, lease-lost-while-heartbeating, split-brain,
// recovery (heal to the next acknowledged write), availability (no stretch
// without an acknowledged write longer than MaxUnavailable while a majority
// is healthy), a per-task porcupine model (TaskModel), replica-reads (no
// node serves a read that differs from the majority's at the same applied
// index), cron-once-per-slot (no slot of the workload's @every 1s
// schedule enqueued two tasks; cron.go), dependencies (every tenth enqueue
// of a producer is a diamond of three tasks in one Enqueue, and no task is
// claimed before a Submit of each parent was invoked; deps.go), completed
// (every acknowledged task ends with a Submit, so a task a requeue forgot
// shows), idempotent-retry (every fifth acknowledged key is enqueued
// again, and must answer the first task; completion.go), and coverage
// (the run did what it claims: below). Cron, dependencies and
// idempotent-retry fail a run that gave them less than a minimum to check.
// Their unit tests feed them doctored histories, and the planted run
// (planted.go) shows each catching a bug compiled into the agents.
//
// # A run that did not test fails
//
// Preflight checks, before anything starts, every command the named faults
// need (FaultTools) and names the Debian package of each missing one; only
// then does it check for root, so a non-root user without iptables is told
// about iptables. As root it tries each fault's commands once in a
// throwaway namespace (the statistic match, a loop mount). A fault whose
// apply fails during the run is recorded with its command and error, stops
// the nemesis, and fails the run. The coverage checker fails a scenario
// unless each named fault held at least MinWindows times (smoke 1; long run
// LongMinWindows = 5 from 30 minutes, one per 6 minutes below; the rolling
// upgrade once), each operation type succeeded a minimum number of
// times, and operations were acknowledged inside fault windows (20 in all,
// and at least one inside some window of each fault), so a stalled workload
// cannot pass. results.json (fault_stats) and index.html count each
// fault's windows, hold time, failed applications and ops inside.
//
// # Corruption and replica reads
//
// corrupt-disk stops a random node (a minority), inverts 8 bytes at 4
// random offsets (16 in raft.db, mostly free pages) of one file chosen at
// random among raft.db, Pebble's MANIFEST, an SST and the WAL, and
// restarts it; the window records the file and offsets. After the hold the
// node gets 20 s to serve; if it exited or stayed NOT_SERVING it is wiped
// (data directory emptied, restarted: it rejoins through --join and catches
// up from a snapshot), the documented repair. The window's outcome says
// which: served, repaired itself, refused and wiped, or stuck and wiped.
// A reader issues stale GetTasks (allow_stale) of acknowledged tasks to
// every node at once every 100 ms, and after the drain reads every task
// from every node; each answer records the node, the applied index (from
// the response, or from the docket-applied-index header of a NotFound) and
// the task's state, fence, attempts and a digest of the whole record.
//
// # Overlapping faults
//
// With Overlap 2 (the long run) a second fault may start partway through
// a first, half the time, where overlapBudget allows it: the nodes that
// the held faults take down or cut off stay a minority ((n-1)/2), no
// fault overlaps itself, no two process faults (kill, pause, clock,
// lost writes) share a node, and corrupt-disk, the ring or bridge
// partition, membership and the rolling procedures always run alone. The
// injector then picks its node inside the budget (a partition's cut-off
// side takes in the nodes already impaired). A fault that does not fit
// waits for a heal, so every fault still comes up once per round. Each
// fault keeps the filter rules it added (Rules) and its heal deletes only
// those; the final heal still flushes everything. Windows are numbered
// (Event.Win), so a stop closes its own start whatever else is open.
//
// # Membership, rolling restarts and the rolling upgrade
//
// membership makes one node (the leader or a random one, by the seed)
// leave with the Leave RPC (docket cluster leave), waits for its agent to
// stop, and wipes its data directory; the heal starts it empty, it
// rejoins by gossip, the leader adds it as a non-voter and promotes it,
// and the heal ends only when every node is a voter again.
// rolling-restart gives every node in turn SIGTERM and a restart, waiting
// until the node serves and all nodes are voters before the next, while a
// watcher reads the configuration every second and keeps the fewest
// voters it saw. rolling-upgrade does the same, moving each node to the
// current binary, on a cluster that started on an older one
// (RunConfig.OldBin): before it and after each node but the last, the
// latched level must not move and creating a token (the token level's
// command type) must be refused; after the last, the leader must latch
// the new level and a token must be created. Whatever falls short (a
// rejoin or restart past its deadline, a voter count that dropped, a
// level that moved early or never) is a finding on the window's stop
// (ErrFinding), which the nemesis-findings checker fails.
//
// # Decisions and trade-offs
//
//   - Go, not Clojure: Jepsen itself cannot run here. The harness imports
//     only the client and the protos and runs the built binary, so it tests
//     what ships.
//   - Faults through namespaces and iptables. tc netem is missing from
//     these kernels, so there is no latency or reordering fault; loss is
//     the iptables statistic match. Partitions drop packets between nodes
//     only; clients reach every node, which is what makes a stale leader
//     visible.
//   - Clock skew through the product's --test-clock-offset seam, applied by
//     restarting a node: libfaketime does not move Go's clock. The skew is
//     therefore fixed for a node's lifetime, not a drifting clock.
//   - Lost unfsynced writes use a loop-mounted ext4 image per node
//     (data=writeback, so the Raft log's fsyncs do not flush Pebble's
//     unsynced writes too): at kill time the image file is copied while
//     still mounted, so the copy holds only what reached the loop device,
//     and the node restarts from the copy. It needs root and loop devices,
//     so only the long run uses it.
//   - The smoke's windows are serial (one fault at a time), which makes
//     recovery times attributable; the long run overlaps two compatible
//     faults, which finds more but blurs which fault a slow recovery
//     belongs to (the recovery checker measures from each heal).
//   - The rolling upgrade is a scenario, not a random fault: it needs the
//     cluster to start on the older binary and can happen only once, so
//     it runs first (Nemesis.First), alone, under the workload, and the
//     coverage wants it once (Coverage.Once). A run that starts on the
//     older binary has TLS and gossip encryption but no --auth: a build
//     below the token level cannot create tokens, so the role tokens of
//     the secure mode cannot exist until the upgrade is over.
//   - Applying a fault is synchronous (a clock offset that moves the
//     leadership takes several seconds), so a held fault whose hold ends
//     meanwhile is healed late by that much; its window records the
//     real end.
//   - The voter watch reads the configuration once a second from the
//     leader; a drop shorter than that between two reads would escape it.
//     The rule (a restart is not a leave) makes any drop last at
//     least a reconcile round, so a second is fine-grained enough.
//   - The lease checker only judges a "stale fence" heartbeat that came
//     back before the last accepted renewal could have expired, less a
//     300 ms slack; a lease lost to a lagging apply is not flagged.
//   - The porcupine model does not see reaps, so it cannot tell an accepted
//     Submit after an unobserved reap from a legal one; the stale-accepted
//     checker catches the observable half (a newer claim had completed).
//   - The availability limit (10 s) allows one client deadline (5 s) spent
//     on a node that stopped answering, plus an election. It found that
//     the client kept calling a paused leader for the whole pause; the
//     client now forgets a leader that let a call's deadline pass.
//   - Producers must not outrun the workers by more than the drain can make
//     up; the long run uses more workers, slower producers and a 15-minute
//     drain bound.
//   - Corruption is injected while the node is stopped, never under a
//     running process: the fault is disk rot found at restart, not a torn
//     write. A node that starts and serves is not assumed healthy: the
//     replica-reads, lost and final-hash checkers judge what it serves.
//   - The replica-reads checker compares only answers at one applied
//     index; during the run such pairs are rare (writes never stop), so the
//     read-back after the drain, when every node sits at one index, does
//     most of the comparing. It fails when nothing was compared.
//   - The harness does not import transport (it would pull in the whole
//     server): it repeats the header name, and a test checks they agree.
//   - The harness is secure by default, so every fault is tested on the
//     path a team runs in production; --insecure keeps the plain mode to
//     measure what security costs. Certificates come from the shipped
//     binary's `docket tls`, not from an import of its tlsgen package: the
//     layout forbids it, and the black box is what users run.
//   - --tls-client-auth require: every harness client holds a client
//     certificate, so the strictest setting is the one tested.
//   - The agents' join token is the bootstrap secret: only a wiped node
//     uses it, and a separate admin token would need the cluster up
//     before the first agent starts.
//   - With tokens on, no read returns a fence (transport hides it), so in
//     the secure mode the replica-reads checker compares state, attempts
//     and the rest of the record without the fence; the keyspace hashes
//     (split-brain) and the claims' fences (fences checker) still cover it.
//   - The workload uses one non-default tenant in both modes, so the
//     plain and secure runs do the same work.
//   - Unknown outcomes are info events that may take effect at any later
//     time, as in Jepsen; an acknowledged enqueue counts as delivered when
//     any claim returned it.
package jepsen
