# Docket build, test and codegen. `make test` is what CI runs.
GO        ?= go
BIN       ?= bin/docket
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.0
STATICCHECK_VERSION        ?= v0.8.2
# FUZZTIME is a count of executions, not a duration: with a duration, Go
# 1.26's fuzz coordinator can fail a healthy target with "context deadline
# exceeded" as the time runs out on a loaded machine (golang/go#75804,
# fixed in Go 1.27). A count has no deadline to race.
FUZZTIME  ?= 8000x

.PHONY: all build build-level test staticcheck test-system test-short fuzz-smoke fuzz bench lint proto run clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/docket

# build-level: the current commit linked with a lower feature level, the
# stand-in for an older release in rolling-upgrade tests (fsm/features.go):
# make build-level LEVEL=3 writes bin/docket-level3.
LEVEL ?= 3
build-level:
	$(GO) build -ldflags "-X github.com/dockethq/docket/fsm.levelOverride=$(LEVEL)" -o bin/docket-level$(LEVEL) ./cmd/docket

# test: the whole suite with the race detector (every fuzz target's seed
# corpus runs in it as a plain test), then the packages whose long tests
# run at full length only without it (fsm's metamorphic tests, see
# metamorphicOps; raftlog's bit flips, see FlipRounds), and the TypeScript
# client. The linters are `make lint`, which CI runs beside it; the short
# fuzzing run is in `make test-system`: its instrumented builds took 140 s
# of make test's ten minutes in a fresh clone.
# The race run names its two longest packages first: go test starts them in
# the order they are named, and ./fsm, named in its place among ./..., began
# five minutes in and ran its three and a half minutes alone on one core.
test:
	$(GO) test -race -count=1 -timeout 20m ./fsm ./cmd/docket ./...
	$(GO) test -count=1 -timeout 10m ./fsm ./cluster/raftlog
	$(MAKE) test-ts

# staticcheck: 0 findings, on the default build and on the system tests'.
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags system ./...

# test-system: the slow system tests (floods, attacks, 5-node and leader-kill
# runs against built binaries), then a short run of each fuzz target, so a
# decoder or validation regression on inputs nobody wrote down shows up.
# The tests carry the `system` build tag so that `make test` stays under
# ten minutes on two cores; CI runs both. One
# package at a time (-p 1): the floods assert a latency bound and the agent
# clusters a formation deadline, and neither should share the two cores
# with another package's clusters.
test-system:
	$(GO) test -race -count=1 -p 1 -tags system -timeout 40m -run 'System' ./...
	# the fsm's planted twins: each fault must fail the test that guards it
	$(GO) test -count=1 -tags plantedbugs -run 'Test_Planted' ./fsm
	$(MAKE) fuzz-smoke

test-short:
	$(GO) test -short -count=1 ./...

fuzz-smoke:
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzTaskHistory$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzOrderHeader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./storage -run '^$$' -fuzz '^FuzzCursor$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proto/taskwire -run '^$$' -fuzz '^FuzzTaskCodec$$' -fuzztime $(FUZZTIME)
	$(GO) test ./transport -run '^$$' -fuzz '^FuzzClaimBatchRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./transport -run '^$$' -fuzz '^FuzzFitClaimAnswer$$' -fuzztime $(FUZZTIME)
	$(GO) test ./transport -run '^$$' -fuzz '^FuzzFairQueueRequests$$' -fuzztime $(FUZZTIME)
	$(GO) test ./transport -run '^$$' -fuzz '^FuzzSubmitBatchClaim$$' -fuzztime $(FUZZTIME)

# fuzz: a longer local run of the same targets (FUZZTIME=2000000x make fuzz;
# a duration such as 10m works too, with the flake above).
fuzz: fuzz-smoke

bench:
	$(GO) test ./fsm -run '^$$' -bench . -benchmem -benchtime 2s

# lint: gofmt, go vet and staticcheck. CI runs it beside `make test`; it
# left `make test` so that the test loop stays near ten minutes on two cores.
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(MAKE) staticcheck

# proto regenerates the committed Go code from proto/docketv1/*.proto.
# Needs Debian's protobuf-compiler; the plugins come from the module proxy.
proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(GOBIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(GOBIN):$$PATH" protoc -I proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		proto/docketv1/*.proto

# run: a secure local cluster whose data, certificates and admin token stay
# in DEV_DIR across runs, so `source $(DEV_DIR)/env` in another shell
# keeps working (make clean starts afresh).
DEV_DIR ?= data/dev
run: build
	$(BIN) dev --data-dir $(DEV_DIR)

clean:
	rm -rf bin data

# jepsen-smoke: the chaos harness's CI run: four 3-node scenarios of about
# 90 s each (partition+kill on raft-wal, pause+packet loss, leader
# isolation+clock offset, disk corruption), then a rolling upgrade of about a minute: the
# cluster starts on $(UPGRADE_FROM) and every node in turn moves to
# $(BIN) under the workload, then kills. Needs root (network namespaces, iptables,
# mounts) and iproute2 + iptables (.ci/run installs them). It never skips:
# its preflight first names any missing tool and its package, then fails a
# non-root user (in CI or not); a fault that does not apply fails the run,
# naming the command and its error.
# Fails on any violation and prints where the report is. Heavy runs share
# a lock so that they do not compete for the CPU.
#
# UPGRADE_FROM is the older binary: the path jepsen/UPGRADE_FROM names, if
# that file exists, or else this commit linked at feature level 3
# (make build-level LEVEL=3), the stand-in for an older release.
JEPSEN_BIN ?= bin/jepsen
JEPSEN_OUT ?= jepsen/reports
DURATION   ?= 30m
SEED       ?= 0
UPGRADE_FROM ?= $(shell cat jepsen/UPGRADE_FROM 2>/dev/null || echo bin/docket-level3)

.PHONY: jepsen-build jepsen-smoke jepsen jepsen-matrix build-planted jepsen-planted

jepsen-build: build
	$(GO) build -o $(JEPSEN_BIN) ./jepsen/cmd/jepsen
	@if [ "$(UPGRADE_FROM)" = bin/docket-level3 ]; then $(MAKE) --no-print-directory build-level LEVEL=3; fi

jepsen-smoke: jepsen-build
	$(JEPSEN_BIN) smoke --preflight-only
	flock /tmp/docket-heavy.lock $(JEPSEN_BIN) smoke --bin $(BIN) --upgrade-from $(UPGRADE_FROM) --out $(JEPSEN_OUT)

# jepsen: the long local run: 5 nodes, every fault (membership and the
# rolling restart included), two compatible faults at a time, and first a
# rolling upgrade from $(UPGRADE_FROM) under the workload (TLS and gossip
# encryption, but no --auth: the older build has no tokens; UPGRADE_FROM=
# runs with tokens and without the upgrade). A random seed (or SEED=n).
# DURATION is the time under the nemesis (default 30m); faults are active
# about two thirds of it (results.json: fault_time_s).
# LOG_STORE=bolt runs every agent on raft.db (default: the agent's, raft-wal).
# FAIR=1 adds the fair-queue workload and its per-key-limit and fairness
# checkers (jepsen --fair; it waits for feature level 16 to latch).
LOG_STORE ?=
FAIR ?=
jepsen: jepsen-build
	flock /tmp/docket-heavy.lock $(JEPSEN_BIN) run --nodes 5 --faults all --overlap 2 --duration $(DURATION) --seed $(SEED) --bin $(BIN) --out $(JEPSEN_OUT) $(if $(UPGRADE_FROM),--upgrade-from $(UPGRADE_FROM)) $(if $(LOG_STORE),--log-store $(LOG_STORE)) $(if $(FAIR),--fair)

# jepsen-matrix: the long run on each Raft log store with role tokens (no
# upgrade: the older build has no tokens), then with the rolling upgrade
# first; three runs of DURATION each (RESULTS.md records them).
jepsen-matrix: jepsen-build
	$(MAKE) --no-print-directory jepsen UPGRADE_FROM= LOG_STORE=bolt
	$(MAKE) --no-print-directory jepsen UPGRADE_FROM= LOG_STORE=wal
	$(MAKE) --no-print-directory jepsen

# build-planted: docket with the planted faults compiled in (-tags
# plantedbugs; DOCKET_PLANT turns each on). No release sets the tag.
build-planted:
	$(GO) build -tags plantedbugs -o bin/docket-planted ./cmd/docket

# jepsen-planted: the harness proves it can fail. One short 3-node scenario
# (partition-leader, 30 s of faults) runs on bin/docket-planted with every
# fault off, where every checker must pass, then once per planted fault,
# where the checkers jepsen/planted.go names must fail; first it checks
# that $(BIN) holds no planted code. Eight runs of about a minute (needs root,
# as jepsen-smoke); every one runs the fair-queue workload too.
jepsen-planted: build build-planted
	$(GO) build -o $(JEPSEN_BIN) ./jepsen/cmd/jepsen
	$(JEPSEN_BIN) smoke --preflight-only
	flock /tmp/docket-heavy.lock $(JEPSEN_BIN) planted --bin bin/docket-planted --release-bin $(BIN) --seed $(SEED) --out $(JEPSEN_OUT)

# bench-cluster: `docket bench` against a fresh local 3-node cluster on
# loopback (WORKLOAD=enqueue|drain|cycle|heartbeat|failover|requeue|backlog|
# ceiling, BENCHFLAGS for more flags; see BENCHMARKS.md). It takes the heavy
# lock so it does not share the CPU with other heavy runs.
WORKLOAD   ?= enqueue
BENCHFLAGS ?=

.PHONY: bench-cluster natsbench bench-sitting

# natsbench: the NATS side of BENCHMARKS.md's comparison (cmd/natsbench, its
# own module so the NATS client stays out of the docket binary and out of
# make test). It needs nats-server on PATH:
#   go install github.com/nats-io/nats-server/v2@v2.15.2
natsbench:
	cd cmd/natsbench && $(GO) build -o ../../bin/natsbench .

# bench-sitting: BENCHMARKS.md's one-sitting comparison: Docket and NATS
# JetStream run by turns, 3 interleaved rounds (ROUNDS=n), then the medians.
# About 12 minutes on 2 cores (the drains fill 200,000 and 280,000); reports stay in .bench/sitting-<time>.
bench-sitting: build natsbench
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" flock /tmp/docket-heavy.lock cmd/natsbench/sitting.sh

bench-cluster: build
	flock /tmp/docket-heavy.lock $(BIN) bench --workload $(WORKLOAD) $(BENCHFLAGS)

# test-ts: the TypeScript client's tests (client/typescript: npm ci, then
# npm test, which starts a secure docket dev cluster of $(BIN)), when node
# is installed; without it, says so and passes.
.PHONY: test-ts proto-ts
test-ts: build
	@if command -v node >/dev/null && command -v npm >/dev/null; then \
		cd client/typescript && npm ci --no-audit --no-fund && DOCKET_BIN="$(abspath $(BIN))" npm test; \
	else \
		echo "test-ts: skipped: node is not installed (client/typescript needs Node 20 or newer)"; \
	fi

# proto-ts regenerates client/typescript/src/gen from proto/docketv1 (protoc
# from Debian's protobuf-compiler, ts-proto from the package's lockfile);
# npm test fails while it is stale.
proto-ts:
	cd client/typescript && npm ci --no-audit --no-fund && npm run gen
