package server_test

import (
	"context"
	"strings"
	"sync"
	"time"

	metrics "github.com/armon/go-metrics"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// The recorders of BenchmarkEnqueueHops. Each one notes the moments one
// part of the write path reaches, on the monotonic clock of the one
// process that runs the whole cluster, so the moments of the client, the
// leader and the followers can be subtracted from each other.

// mark is one moment of one part.
type mark struct {
	what  string    // e.g. "client.out", "store", "raft.commitTime"
	node  string    // the node that noted it, where known
	peer  string    // the follower of an AppendEntries sample
	first uint64    // the first log index a StoreLogs call held
	start time.Time // for spans (raft's timers, StoreLogs): when it began
	at    time.Time // when it ended, or the moment itself
}

// tape keeps marks in the order they were noted.
type tape struct {
	mu    sync.Mutex
	marks []mark
}

func (t *tape) note(m mark) {
	t.mu.Lock()
	t.marks = append(t.marks, m)
	t.mu.Unlock()
}

// take returns the marks noted since the last take.
func (t *tape) take() []mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.marks
	t.marks = make([]mark, 0, 64)
	return out
}

// raftSink is a go-metrics sink that keeps hashicorp/raft's timers as
// spans: raft reports a timer once it ends, so the sink's clock is the
// end and the value (milliseconds) gives the start. go-metrics has one
// sink per process, so raft's timers carry no node; the hop table tells
// the leader's from the followers' by the moments around them.
type raftSink struct{ t *tape }

var timers = map[string]bool{
	"raft.leader.dispatchLog":            true,
	"raft.replication.appendEntries.rpc": true,
	"raft.commitTime":                    true,
	"raft.fsm.applyBatch":                true,
	"raft.fsm.apply":                     true,
	"raft.rpc.appendEntries":             true,
	"raft.rpc.appendEntries.storeLogs":   true,
	"raft.rpc.appendEntries.processLogs": true,
	"raft.fsm.enqueue":                   true,
}

func (s raftSink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	name := strings.Join(key, ".")
	if !timers[name] {
		return
	}
	now := time.Now()
	m := mark{what: name, at: now, start: now.Add(-time.Duration(float64(val) * float64(time.Millisecond)))}
	for _, l := range labels {
		if l.Name == "peer_id" {
			m.peer = l.Value
		}
	}
	s.t.note(m)
}

func (s raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }
func (raftSink) SetGauge([]string, float32)            {}
func (raftSink) SetGaugeWithLabels([]string, float32, []metrics.Label) {
}
func (raftSink) EmitKey([]string, float32)     {}
func (raftSink) IncrCounter([]string, float32) {}
func (raftSink) IncrCounterWithLabels([]string, float32, []metrics.Label) {
}

// installRaftSink makes raft's timers marks of t, for the whole process.
func installRaftSink(t *tape) error {
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.EnableServiceLabel = false
	_, err := metrics.NewGlobal(cfg, raftSink{t})
	return err
}

// timedLogs notes each StoreLogs call of one node's log store (below
// raft's LogCache, where the append and its fsync happen).
type timedLogs struct {
	raft.LogStore
	node string
	t    *tape
}

func (l *timedLogs) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *timedLogs) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := l.LogStore.StoreLogs(logs)
	if len(logs) > 0 {
		l.t.note(mark{what: "store", node: l.node, first: logs[0].Index, start: start, at: time.Now()})
	}
	return err
}

// rpcStats notes when a traced RPC (tracedMethod) begins, when its
// request and its answer are on the wire (gRPC reports a payload once it
// is written or read and decoded), and when it ends. side is "client" or
// "server".
type rpcStats struct {
	side string
	t    *tape
}

type tracedKey struct{}

// tracedMethod reports whether the hop benchmarks take calls of the gRPC
// method apart: the data path's, one at a time.
func tracedMethod(full string) bool {
	for _, m := range []string{"/Enqueue", "/Claim", "/ClaimBatch", "/SubmitBatch"} {
		if strings.HasSuffix(full, m) {
			return true
		}
	}
	return false
}

func (h rpcStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if tracedMethod(info.FullMethodName) {
		return context.WithValue(ctx, tracedKey{}, true)
	}
	return ctx
}

func (h rpcStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if ctx.Value(tracedKey{}) == nil {
		return
	}
	var what string
	switch s.(type) {
	case *stats.Begin:
		what = "begin"
	case *stats.OutPayload:
		what = "out"
	case *stats.InPayload:
		what = "in"
	case *stats.End:
		what = "end"
	default:
		return
	}
	h.t.note(mark{what: h.side + "." + what, at: time.Now()})
}

func (rpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (rpcStats) HandleConn(context.Context, stats.ConnStats)                       {}

// handlerSpan notes when a traced handler starts and returns, inside
// the server's own interceptor (auth, the connection guard, the codec).
func handlerSpan(t *tape) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !tracedMethod(info.FullMethod) {
			return handler(ctx, req)
		}
		t.note(mark{what: "handler.start", at: time.Now()})
		resp, err := handler(ctx, req)
		t.note(mark{what: "handler.end", at: time.Now()})
		return resp, err
	}
}
