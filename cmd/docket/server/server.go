// Package server assembles one Docket server from its parts: a
// cluster.Node over its config and the transport.Server that serves the
// node's API on a listener. `docket agent` and the system tests start
// servers through it, so the wiring and the order of a stop are written
// once.
package server

import (
	"context"
	"errors"
	"net"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/transport"
)

// Server is a running node and its API.
type Server struct {
	Node *cluster.Node
	API  *transport.Server

	served   chan struct{} // closed when the API's Serve returned
	serveErr error         // what it returned, set before served closes
}

// Start opens the node for cfg and serves its API on lis. The node
// advertises cfg.GRPCAddr, which may differ from lis's address (a proxy in
// front of it, in tests). On error lis is closed.
func Start(cfg cluster.Config, api transport.Config, lis net.Listener) (*Server, error) {
	node, err := cluster.New(cfg)
	if err != nil {
		return nil, errors.Join(err, lis.Close())
	}
	s := &Server{Node: node, API: transport.New(node, node.Service(), api), served: make(chan struct{})}
	go func() {
		s.serveErr = s.API.Serve(lis)
		close(s.served)
	}()
	return s, nil
}

// Served is closed when the API stopped serving, by Stop or on its own;
// ServeErr then says why.
func (s *Server) Served() <-chan struct{} { return s.served }

// ServeErr is the API's Serve error once Served is closed (nil after a
// Stop).
func (s *Server) ServeErr() error {
	<-s.served
	return s.serveErr
}

// Stop stops gracefully: the API stops taking work and drains, then the
// node hands leadership over, shuts Raft down and closes its stores. It
// waits for the API's Serve to return, and returns every error met.
func (s *Server) Stop(ctx context.Context) error {
	apiErr := s.API.Stop(ctx)
	nodeErr := s.Node.Shutdown(ctx)
	return errors.Join(apiErr, nodeErr, s.ServeErr())
}

// Crash stops as a kill would: the API stops, the node stops without
// handing leadership over. For tests.
func (s *Server) Crash(ctx context.Context) error {
	apiErr := s.API.Stop(ctx)
	nodeErr := s.Node.Crash()
	return errors.Join(apiErr, nodeErr, s.ServeErr())
}
