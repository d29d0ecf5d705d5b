package server_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cmd/docket/server"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// BenchmarkEnqueueHops measures one enqueue at c=1 hop by hop: three real
// servers (cluster.Node behind transport.Server, the default log store,
// fsync on) in this process on loopback, one Go client, one 128 B task a
// call, one call at a time. Recorders on each part (hoptrace_test.go)
// note the moments a call reaches, and the table printed at the end
// gives each hop's p50 and p99 and its share of the mean total:
//
//	go test ./cmd/docket/server -run '^$' -bench EnqueueHops -benchtime 2000x
//
// The nodes share one process, so a TCP hop between them costs what it
// costs between goroutines (tens of microseconds less than between
// processes, BENCHMARKS.md), and the wire hops read low against
// `docket bench`. Every other hop does the work a node does.
func BenchmarkEnqueueHops(b *testing.B) {
	ctx, tp, nodes, c := startHopBench(b)
	body := hopBody()
	enqueue := func() error {
		ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
		defer ecancel()
		items, err := c.Enqueue(ectx, &pb.NewTask{Queue: "hops", Payload: body})
		if err == nil {
			err = client.ItemError(items[0])
		}
		return err
	}
	// Warm up as docket bench does: connections, leader, runtime.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if err := enqueue(); err != nil {
			b.Fatal(err)
		}
	}
	leader := leaderID(nodes)
	tp.take()
	var calls []callMarks
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := enqueue()
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		calls = append(calls, callMarks{start: t0, end: t1, marks: tp.take()})
	}
	b.StopTimer()
	lad, skipped := ladder(calls, hops, func(c callMarks) ([]time.Time, string) { return points(c, leader) })
	if b.N >= 100 {
		printLadder(os.Stdout, "Enqueue at c=1", hops, lad, skipped)
	}
}

// startHopBench starts the recorders, three servers and a Go client
// whose calls they trace; b's cleanup stops them. ctx bounds the run.
func startHopBench(b *testing.B) (ctx context.Context, tp *tape, nodes []*server.Server, c *client.Client) {
	b.Helper()
	tp = &tape{}
	if err := installRaftSink(tp); err != nil {
		b.Fatal(err)
	}
	nodes, addrs := startHopCluster(b, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	c, err := client.New(ctx, addrs, client.WithDialOptions(grpc.WithStatsHandler(rpcStats{side: "client", t: tp})))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(); err != nil {
			b.Errorf("close the client: %v", err)
		}
	})
	return ctx, tp, nodes, c
}

// hopBody is the ladders' 128-byte payload.
func hopBody() []byte {
	body := make([]byte, 128)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	return body
}

// startHopCluster starts three servers with the recorders in place and
// the consistency check off (its hashing would land inside some calls).
func startHopCluster(b *testing.B, tp *tape) (nodes []*server.Server, addrs []string) {
	b.Helper()
	return startServers(b, 3, func(cfg *cluster.Config, api *transport.Config) {
		cfg.CheckInterval = -1
		id := cfg.ID
		cfg.WrapLogStore = func(s raft.LogStore) raft.LogStore { return &timedLogs{LogStore: s, node: id, t: tp} }
		api.ServerOptions = []grpc.ServerOption{grpc.StatsHandler(rpcStats{side: "server", t: tp}), grpc.ChainUnaryInterceptor(handlerSpan(tp))}
	})
}

func leaderID(nodes []*server.Server) string {
	for _, s := range nodes {
		if s.Node.IsLeader() {
			return s.Node.ID()
		}
	}
	return ""
}

// callMarks is one call: its span as its caller saw it and what the
// recorders noted meanwhile.
type callMarks struct {
	start, end time.Time
	marks      []mark
}

// hops are the steps of one enqueue, in order; each is the time between
// the moment before it and its own.
var hops = callHops("Enqueue")

// callHops are the steps of one call of the client's verb, in order.
func callHops(verb string) []string {
	return slices.Concat([]string{
		"client: " + verb + " → gRPC call begins (key, sharer)",
		"client: encode + write request",
		"wire → server has decoded request",
		"server interceptors (codec, auth, guard)",
		"handler → raft dispatch (admit, group commit, encode, applyCh)",
	}, raftHops, []string{
		"applied → handler returns (future, group commit, answer)",
		"server: encode + write answer",
		"wire → client has decoded answer",
		"client: → " + verb + " returns",
	})
}

// ladder turns each call's marks into its hop times, with points giving
// a call's moments in hop order (len(names)+1 of them). A call whose marks
// do not tell its hops apart (a background entry in its window, a follower
// slower than the answer) is skipped and counted by why.
func ladder(calls []callMarks, names []string, points func(callMarks) ([]time.Time, string)) (per [][]time.Duration, skipped map[string]int) {
	per = make([][]time.Duration, len(names)+1) // the last row is the total
	skipped = map[string]int{}
	for _, c := range calls {
		pts, why := points(c)
		if why == "" {
			for i := 1; i < len(pts); i++ {
				if pts[i].Before(pts[i-1]) {
					why = "out of order at " + names[i-1]
					break
				}
			}
		}
		if why != "" {
			skipped[why]++
			continue
		}
		for i := range names {
			per[i] = append(per[i], pts[i+1].Sub(pts[i]))
		}
		per[len(names)] = append(per[len(names)], c.end.Sub(c.start))
	}
	return per, skipped
}

// find returns the first mark of c that is what and passes ok.
func (c callMarks) find(what string, ok func(mark) bool) (mark, bool) {
	for _, m := range c.marks {
		if m.what == what && ok(m) {
			return m, true
		}
	}
	return mark{}, false
}

// points finds the moments of one Docket call, in hops' order.
func points(c callMarks, leader string) (pts []time.Time, why string) {
	all := func(mark) bool { return true }
	cBegin, ok1 := c.find("client.begin", all)
	cOut, ok2 := c.find("client.out", all)
	sIn, ok3 := c.find("server.in", all)
	hStart, ok4 := c.find("handler.start", all)
	hEnd, ok5 := c.find("handler.end", all)
	sOut, ok6 := c.find("server.out", all)
	cIn, ok7 := c.find("client.in", all)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return nil, "no RPC marks"
	}
	rp, why := raftPoints(c, leader, hStart.at, hEnd.at)
	if why != "" {
		return nil, why
	}
	pts = append([]time.Time{c.start, cBegin.at, cOut.at, sIn.at, hStart.at}, rp...)
	return append(pts, hEnd.at, sOut.at, cIn.at, c.end), ""
}

// raftHops are the hops raftPoints tells apart, from the leader loop's
// dispatch of an entry to its FSM apply on the leader.
var raftHops = []string{
	"leader log append + fsync",
	"leader: append done → AppendEntries sent",
	"AppendEntries: wire + follower decode",
	"follower log append + fsync",
	"AppendEntries answer: wire + leader decode",
	"leader: commit",
	"commit → FSM picks up",
	"FSM apply (leader)",
}

// raftPoints finds the moments of the one entry the leader appended
// between after and before: len(raftHops)+1 of them.
func raftPoints(c callMarks, leader string, after, before time.Time) ([]time.Time, string) {
	lStore, ok := c.find("store", func(m mark) bool { return m.node == leader && m.start.After(after) })
	if !ok {
		return nil, "no leader append"
	}
	dispatch, ok := c.find("raft.leader.dispatchLog", func(m mark) bool { return !m.at.Before(lStore.at) })
	if !ok {
		return nil, "no dispatch"
	}
	// The follower whose answer committed the entry: of the followers that
	// stored it, the one whose AppendEntries answer the leader had first.
	var fStore, ae mark
	found := false
	for _, f := range c.marks {
		if f.what != "store" || f.node == leader || f.first != lStore.first {
			continue
		}
		a, ok := c.find("raft.replication.appendEntries.rpc", func(m mark) bool {
			return m.peer == f.node && !m.start.After(f.start) && !m.at.Before(f.at)
		})
		if ok && (!found || a.at.Before(ae.at)) {
			fStore, ae, found = f, a, true
		}
	}
	if !found {
		return nil, "no follower answer"
	}
	commit, ok := c.find("raft.commitTime", func(m mark) bool { return !m.at.Before(ae.at) })
	if !ok {
		return nil, "no commit"
	}
	// Docket's FSM applies in batches; the ceiling's no-op FSM one by one.
	leaderApply := func(m mark) bool { return !m.start.Before(commit.at) && !m.at.After(before) }
	apply, ok := c.find("raft.fsm.applyBatch", leaderApply)
	if !ok {
		if apply, ok = c.find("raft.fsm.apply", leaderApply); !ok {
			return nil, "no leader apply"
		}
	}
	return []time.Time{dispatch.start, lStore.at, ae.start, fStore.start, fStore.at, ae.at, commit.at, apply.start, apply.at}, ""
}

// printLadder writes the hop table: p50, p99, the hop's share of the
// summed p50s (the ladder of a typical call, which the fsyncs' tails do
// not swamp) and of the mean total (the means add up; percentiles do not).
func printLadder(w io.Writer, title string, names []string, per [][]time.Duration, skipped map[string]int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\n%s, %d calls measured; skipped, their marks not telling the hops apart: %v\n",
		title, len(per[len(names)]), skipped)
	fmt.Fprintln(tw, "hop\tp50 µs\tp99 µs\tmean µs\tp50 share\tmean share\t")
	total := mean(per[len(names)])
	var p50s time.Duration
	for _, d := range per[:len(names)] {
		p50s += pct(d, 0.50)
	}
	for i, name := range append(slices.Clone(names), "total (caller's view)") {
		d := per[i]
		share := 100 * us(pct(d, 0.50)) / us(p50s)
		if i == len(names) {
			share = 100
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1f %%\t%.1f %%\t\n", name, us(pct(d, 0.50)), us(pct(d, 0.99)), us(mean(d)),
			share, 100*us(mean(d))/us(total))
	}
	fmt.Fprintf(tw, "sum of the hops' p50s\t%.0f\t\t\t\t\t\n", us(p50s))
	_ = tw.Flush() // stdout
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
