// Package jepsen is Docket's chaos harness: it runs the built `docket agent`
// binary as real processes, breaks them under a workload, and checks the
// recorded history against what Docket promises.
//
// It owns:
//   - the scenarios: the smoke, the long run, the rolling upgrade and the
//     planted-fault run that proves each checker can fail;
//   - the nemeses: partitions, loss, kills, pauses, clock skew, lost
//     writes, disk corruption, membership and rolling restarts, with their
//     heals and the rules for overlapping them;
//   - the network: one Linux network namespace per node, a bridge and a
//     control namespace, created and removed by each run;
//   - the secure path: certificates and role tokens made by the shipped
//     binary, as an operator makes them;
//   - the history (history.jsonl on CLOCK_MONOTONIC) and the checkers,
//     pure functions of it, with the coverage checker that fails a run
//     that did not test what it names.
//
// It must not:
//   - dial any address outside loopback and its own namespaces' subnet, or
//     dial that subnet from the root namespace;
//   - import server packages (cluster, transport, fsm): it tests what ships,
//     through the client, the protos and the binary;
//   - run an unbounded loop or a request without a deadline;
//   - leave namespaces, processes or mounts behind on any exit path.
//
// DESIGN.md describes how a run goes, each fault and checker, and the
// decisions and trade-offs behind them.
package jepsen
