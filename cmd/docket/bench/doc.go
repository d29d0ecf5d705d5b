// Package bench is `docket bench`: a load generator that starts a fresh
// local 3-node cluster (or targets one with --addr), runs one workload, and
// reports throughput and p50/p90/p99/p99.9 latency per operation, next to
// the rate the Raft log alone reaches on the same machine in the same run.
//
// Workloads: enqueue (single or --batch), drain (claim and submit a filled
// queue), cycle (producers and workers at once), heartbeat (N leases held
// and extended), failover (SIGKILL the leader under load, time to the first
// acknowledged write and to the first Status that shows a new leader,
// --trials times), requeue (a worker dies holding
// leases: time until each task is claimed again), backlog (claim latency
// at N pending tasks against a near-empty queue, RSS per node, restart of
// a node holding the backlog) and ceiling (the raft ceiling alone).
//
// # Key design decisions and trade-offs
//
//   - The local cluster is three child `docket agent` processes of this
//     binary, as `docket dev` runs them: a SIGKILL is a real crash, and RSS
//     is per node. The cost is process start-up (about a second) per run.
//   - The raft ceiling runs in-process through cluster.NewBareRaft: the
//     same raft.Config, fsync'd BoltDB log, LogCache and TCP transport as a
//     node, over a no-op FSM, with entries the size of the workload's
//     Enqueue command. It leaves out exactly what the queue adds: gRPC, the
//     FSM and Pebble. It runs right after the workload, in the same run, so
//     the two numbers share the machine's state.
//   - --procs 3 runs the ceiling's three servers as three child processes
//     (`docket bench ceiling-node`, groups.go), so process boundaries are
//     in it as they are in a real cluster; --groups N makes each process
//     host one server of N independent Raft groups with leaders spread
//     evenly, the measurement behind SCALING.md. -c callers are split over
//     the groups, so every N offers the same load. Each node sends back at
//     most 200,000 evenly thinned samples with exact counts: percentiles
//     of a 3-process run weigh each node's samples by that, not exactly.
//   - Latencies are exact (every sample kept up to two million per
//     operation, then a uniform reservoir); percentiles are nearest-rank.
//     Rates are counts over the wall time from the first operation to the
//     last one's end; operations in flight when --duration ends finish and
//     count.
//   - Every loop is bounded: --duration and --count for the measured
//     phase, a timeout for every operation and every wait for the cluster.
//     The local cluster binds 127.0.0.1 only.
//   - Fair queues (fair.go): --task-keys N gives every enqueued task a
//     key, round robin over N so that all N stay active while a backlog
//     lasts; --order and --max-running-per-key set the queue's per-key
//     rules through SetQueueLimits before the workload, after waiting
//     for the cluster to latch feature level 16. The raft ceiling's
//     entries carry the key too. The report states all three as soon as
//     one is given; with none, no task has a key, the queue's rules are
//     left alone and the report does not mention them.
//   - --pairs N compares two server builds (--agent-exe, --agent-exe-b)
//     under one load generator: 2N runs by turns, A first in odd pairs and
//     B in even ones, each pair read as B ÷ A (pairs.go). A 2-core box
//     drifts by more between minutes than most changes are worth, so a
//     pair's ratio, and how many pairs agree, say more than two medians.
//     The raft ceiling is left out: it measures neither build.
//   - Each node serves pprof on 127.0.0.1:base+200+i, so a profile can be
//     taken while a workload runs (see BENCHMARKS.md).
//   - The local cluster runs without --auth (with TLS only when --tls): a
//     token check per call is a map lookup in the node's replica, not
//     worth a second variant. --token (or DOCKET_TOKEN) reaches an --addr
//     cluster, `docket dev`'s included; an explicit --token without --addr
//     is refused, DOCKET_TOKEN is then ignored, and the report's command
//     line shows REDACTED in place of the secret.
package bench
