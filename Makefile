# Docket build, test and codegen. `make test` is what CI runs.
GO        ?= go
BIN       ?= bin/docket
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.0
FUZZTIME  ?= 5s

.PHONY: all build test test-short fuzz-smoke fuzz bench lint proto run clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/docket

# test: the whole suite with the race detector, then a short run of each fuzz
# target so a decoder or validation regression shows up in CI.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) fuzz-smoke

test-short:
	$(GO) test -short -count=1 ./...

fuzz-smoke:
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./fsm -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME)

# fuzz: a longer local run of the same targets (FUZZTIME=10m make fuzz).
fuzz: fuzz-smoke

bench:
	$(GO) test ./fsm -run '^$$' -bench . -benchmem -benchtime 2s

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

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

run: build
	$(BIN) dev

clean:
	rm -rf bin data
