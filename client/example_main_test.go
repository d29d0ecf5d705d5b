package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/transport"
)

// TestMain serves one node for the Examples and points the environment
// at it as `source data/dev/env` does for `make run`'s cluster, so that
// an Example reads as a program against a real cluster and its Output is
// checked: memnode.Node is the production Service and FSM with Raft
// replaced by an apply in place, behind the production gRPC server on
// loopback. It runs no leader loops, so no schedule fires here.
func TestMain(m *testing.M) {
	stop, err := serveExamples()
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples' node:", err)
		os.Exit(2)
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "examples' node:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// serveExamples starts the node, sets DOCKET_ADDR to it and clears the
// other variables client.WithEnv reads, and returns what stops it.
func serveExamples() (stop func() error, err error) {
	dir, err := os.MkdirTemp("", "docket-examples-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	node, err := memnode.New(dir, true, service.ServiceConfig{})
	if err != nil {
		return nil, fmt.Errorf("mem node: %w", err)
	}
	// A cluster latches the level its servers all support; this one
	// server supports all of its build's (DAGs, cancelling running tasks).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := node.Latch(ctx, node.FSM().MaxLevel()); err != nil {
		return nil, errors.Join(fmt.Errorf("latch: %w", err), node.Close())
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("listen: %w", err), node.Close())
	}
	node.SetLeaderAddr(lis.Addr().String())
	srv := transport.NewServer(node, transport.Config{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		if err := <-served; err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if err := node.Close(); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		return os.RemoveAll(dir)
	}
	envErr := os.Setenv(client.EnvAddr, lis.Addr().String())
	for _, k := range []string{client.EnvTLSCA, client.EnvTLSCert, client.EnvTLSKey, client.EnvToken} {
		envErr = errors.Join(envErr, os.Unsetenv(k))
	}
	if envErr != nil {
		return nil, errors.Join(fmt.Errorf("environment: %w", envErr), stop())
	}
	return stop, nil
}

// runWorker runs w until the returned stop is called; stop returns Run's
// error. A program would usually run its Worker until a signal instead.
func runWorker(ctx context.Context, w *client.Worker) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}
