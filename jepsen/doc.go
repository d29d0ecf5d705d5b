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
// # The workload
//
// Producers enqueue with their own idempotency keys (the key is also the
// payload) and retry a key whose outcome is unknown. Workers claim one task
// at a time under a 2 s lease, heartbeat every lease/4, sometimes stall past
// the lease without heartbeating or nack, then write to a downstream
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
// is healthy), and a per-task porcupine model (TaskModel). Their unit
// tests feed them doctored histories.
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
//   - Fault windows are serial (one fault at a time, each healed), which
//     keeps a majority able to heal and makes recovery times attributable;
//     overlapping faults would find more, and are future work.
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
//   - Unknown outcomes are info events that may take effect at any later
//     time, as in Jepsen; an acknowledged enqueue counts as delivered when
//     any claim returned it.
package jepsen
