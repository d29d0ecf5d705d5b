package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// runDev starts a local 3-node cluster as child processes of this binary,
// so that a node can be killed and restarted like a real server. It is
// secure unless --insecure: TLS on every channel and --auth, with
// throwaway certificates and an admin token kept in the data dir, and an
// env file that points a shell's verbs at the cluster.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "keep the cluster's data here (default: a fresh temp dir, removed on exit)")
	basePort := fs.Int("base-port", 7400, "node i serves gRPC on base+i, Raft on base+100+i, gossip on base-100+i, /metrics on base+200+i and the web dashboard on base+300+i, on 127.0.0.1")
	nodes := fs.Int("nodes", 3, "number of nodes (3 or 5)")
	logStore := fs.String("log-store", raftlog.LogStoreAuto, "the nodes' Raft log store: wal or bolt (default: wal, or the store a kept --data-dir holds)")
	insecure := fs.Bool("insecure", false, "run without TLS and without tokens: anyone who reaches a port may do anything")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 9 {
		return fmt.Errorf("%w: --nodes %d not in 1..9", errUsage, *nodes)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	extra := []string{"--reflection"}
	if *logStore != raftlog.LogStoreAuto {
		extra = append(extra, "--log-store", *logStore)
	}
	c, leader, err := localcluster.Start(ctx, localcluster.Options{
		Exe: exe, Dir: *dataDir, TempName: "docket-dev-", BasePort: *basePort, Nodes: *nodes,
		TLS: !*insecure, Auth: !*insecure, Dashboard: true, Debug: true,
		ExtraArgs: extra,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Fprintln(stderr, "docket dev:", err)
		}
	}()
	fmt.Fprintf(stdout, "docket dev: %d-node cluster ready (every node serves the Queue API), leader %s\n", len(c.Nodes), leader)
	fmt.Fprintf(stdout, "data: %s%s\n", c.Dir, map[bool]string{true: "", false: " (removed on exit)"}[*dataDir != ""])
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %s  grpc %s  raft %s  pid %d  log %s\n", n.ID, n.GRPC, n.Raft, n.Pid(), n.LogPath)
	}
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %s  dashboard %s\n", n.ID, n.HTTP)
	}
	if c.Token != "" {
		fmt.Fprintf(stdout, "  (the dashboard asks for a token: the admin token below, or one from docket token create)\n")
	}
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %s  metrics %s\n", n.ID, n.Metrics)
	}
	if c.Token != "" {
		fmt.Fprintf(stdout, "  (metrics ask for a reader or admin token over every tenant: curl --cacert %s -H \"Authorization: Bearer $DOCKET_TOKEN\" URL)\n", c.TLS.CA)
	}
	fmt.Fprintf(stdout, "  gRPC reflection is on: %s\n", grpcurlHint(c))
	if err := printDevAccess(stdout, c); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restart a killed node with:  %s %s\n", exe, strings.Join(c.Nodes[0].Args, " "))
	fmt.Fprintf(stdout, "Ctrl-C stops the cluster.\n")

	w := &devWatch{c: c, exe: exe, out: stdout, hand: map[string]int{}, serving: map[string]bool{}}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "docket dev: stopping (and any node restarted by hand on its data dir)")
			return nil
		case <-time.After(time.Second):
		}
		w.poll(ctx)
	}
}

// devWatch reports nodes that exit, and nodes restarted by hand with the
// printed command: their pid, and when they serve again.
type devWatch struct {
	c       *localcluster.Cluster
	exe     string
	out     io.Writer
	hand    map[string]int  // node id -> pid of the agent restarted by hand
	serving map[string]bool // node id -> its hand-restarted agent was seen serving
}

func (w *devWatch) poll(ctx context.Context) {
	for _, n := range w.c.Nodes {
		if gone, err := n.Exited(); gone {
			fmt.Fprintf(w.out, "docket dev: %s exited (%v); restart it (in another shell) with: %s %s\n", n.ID, err, w.exe, strings.Join(n.Args, " "))
		}
		if n.Pid() != 0 {
			continue
		}
		pid := n.HandPID()
		if pid != w.hand[n.ID] {
			w.hand[n.ID], w.serving[n.ID] = pid, false
			if pid != 0 {
				fmt.Fprintf(w.out, "docket dev: %s runs again, pid %d (started by hand; Ctrl-C here stops it too)\n", n.ID, pid)
			}
		}
		if pid != 0 && !w.serving[n.ID] && w.c.Serving(ctx, n.GRPC) {
			w.serving[n.ID] = true
			fmt.Fprintf(w.out, "docket dev: %s (pid %d) serves the Queue API again\n", n.ID, pid)
		}
	}
}

// grpcurlHint is a grpcurl command that lists the services of node 1.
func grpcurlHint(c *localcluster.Cluster) string {
	n := c.Nodes[0]
	if c.TLS == nil {
		return "grpcurl -plaintext " + n.GRPC + " list"
	}
	return fmt.Sprintf("grpcurl -cacert %s -H \"authorization: Bearer $DOCKET_TOKEN\" %s list", c.TLS.CA, n.GRPC)
}
