#!/bin/bash
# One sitting: Docket beside NATS JetStream on this box, ROUNDS interleaved
# rounds (default 3), each run as its own fresh 3-node cluster. Every run's
# JSON report goes to $OUT/r<round>-<name>.json; `natsbench table $OUT`
# prints the medians. Run from the repository root (make bench-sitting).
set -u
OUT=${OUT:-.bench/sitting-$(date -u +%Y%m%dT%H%M)}
ROUNDS=${ROUNDS:-3}
D=${DOCKET:-./bin/docket}
N=${NATSBENCH:-./bin/natsbench}
mkdir -p "$OUT"
fails=0
run() { # name, command...
	local name=$1
	shift
	if "$@" --json >"$OUT/r$R-$name.json" 2>"$OUT/r$R-$name.err"; then
		echo "$(date -u +%T) round $R $name: ok"
	else
		echo "$(date -u +%T) round $R $name: FAILED (see $OUT/r$R-$name.err)"
		fails=$((fails + 1))
	fi
}
# pair runs two runs compared with each other (each a name and a command,
# as one string of words), NATS's first in odd rounds and Docket's first in
# even ones: on a 2-core box the second run of a by-turns pair read faster
# in 8 of 10 pairs whichever build it was (BENCHMARKS.md), so a fixed order
# would favour one side.
pair() {
	if ((R % 2)); then
		run $1
		run $2
	else
		run $2
		run $1
	fi
}
for R in $(seq 1 "$ROUNDS"); do
	pair "nats-pub-c1 $N --workload pub -c 1 --duration 5s" \
		"docket-enq-c1 $D bench --workload enqueue -c 1 --duration 5s"
	pair "nats-pub-c16 $N --workload pub -c 16 --duration 5s" \
		"docket-enq-c16 $D bench --workload enqueue -c 16 --duration 5s"
	pair "nats-pub-c256 $N --workload pub -c 256 --duration 5s" \
		"docket-enq-c256 $D bench --workload enqueue -c 256 --duration 5s"
	pair "nats-async $N --workload async -c 4 --window 100 --duration 5s" \
		"docket-batch $D bench --workload enqueue -c 16 --batch 100 --duration 5s --ceiling=false"
	# Backlogs of 280,000 and 200,000, not 50,000: a drain that fits in
	# memory hides what a real backlog costs (the drain slowed with it).
	pair "nats-fetch $N --workload fetch -c 4 --fetch 100 --count 280000" \
		"docket-drain $D bench --workload drain -c 4 --claim-batch 100 --count 200000 --duration 60s --ceiling=false"
	run docket-cycle-batched $D bench --workload cycle --producers 8 --batch 100 --workers 256 --claim-batch 32 --duration 8s --ceiling=false
	# The 3-process ceiling of the default store (wal), and bolt beside it.
	run ceiling3-c1 $D bench --workload ceiling --procs 3 -c 1 --duration 5s
	run ceiling3-bolt-c1 $D bench --workload ceiling --procs 3 -c 1 --duration 5s --log-store bolt
	run docket-bolt-c1 $D bench --workload enqueue -c 1 --duration 5s --log-store bolt --ceiling=false
	run docket-bolt-c16 $D bench --workload enqueue -c 16 --duration 5s --log-store bolt --ceiling=false
	# Production defaults: TLS on every hop and a bearer token on every call.
	run docket-prod-c1 $D bench --workload enqueue -c 1 --duration 5s --tls --auth --ceiling=false
	run docket-prod-c16 $D bench --workload enqueue -c 16 --duration 5s --tls --auth --ceiling=false
	run docket-prod-c256 $D bench --workload enqueue -c 256 --duration 5s --tls --auth --ceiling=false
	run docket-prod-drain $D bench --workload drain -c 4 --claim-batch 100 --count 200000 --duration 60s --tls --auth --ceiling=false
	pair "nats-pub-1m $N --workload pub -c 16 --payload 1048576 --duration 5s" \
		"docket-enq-1m $D bench --workload enqueue -c 16 --payload 1048576 --duration 5s --ceiling=false"
done
echo "reports in $OUT; $fails failed"
$N table "$OUT"
exit $((fails > 0))
