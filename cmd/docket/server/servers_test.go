package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cmd/docket/server"
	"github.com/dockethq/docket/internal/testwait"
	"github.com/dockethq/docket/transport"
)

// startServers starts size real servers (cluster.Node behind
// transport.Server, the default log store, fsync on) on loopback that
// find each other as `docket dev`'s do, each config edited by edit, and
// waits for a leader every node knows. They stop when the test ends.
func startServers(tb testing.TB, size int, edit func(*cluster.Config, *transport.Config)) (nodes []*server.Server, addrs []string) {
	tb.Helper()
	var lis []net.Listener
	for range size {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lis = append(lis, l)
		addrs = append(addrs, l.Addr().String())
	}
	base := tb.TempDir()
	var gossip []string
	for i, l := range lis {
		cfg := cluster.DefaultConfig()
		cfg.ID = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = filepath.Join(base, cfg.ID)
		cfg.RaftAddr, cfg.GRPCAddr, cfg.GossipAddr = "127.0.0.1:0", l.Addr().String(), "127.0.0.1:0"
		cfg.BootstrapExpect, cfg.Join, cfg.GossipLocal = size, slices.Clone(gossip), true
		cfg.Logger = slog.New(slog.DiscardHandler)
		api := transport.Config{Logger: cfg.Logger}
		edit(&cfg, &api)
		s, err := server.Start(cfg, api, l)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx) // teardown after the assertions
		})
		nodes = append(nodes, s)
		gossip = append(gossip, s.Node.GossipAddr())
	}
	testwait.For(tb, 20*time.Second, "a leader every node knows", func() bool {
		for _, s := range nodes {
			if s.Node.LeaderGRPCAddr() == "" {
				return false
			}
		}
		return leaderID(nodes) != ""
	})
	return nodes, addrs
}
