package transport

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/peer"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// newForwarder is the pool of connections to leaders. The leader's
// answer is relayed as it is, so the final client's own limit applies to
// it, not ours.
func newForwarder(dialOpts []grpc.DialOption) *peer.Pool {
	return peer.New(append([]grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		grpc.WithInitialWindowSize(WindowSize),
		grpc.WithInitialConnWindowSize(ConnWindowSize),
	}, dialOpts...)...)
}

// isForwarded reports whether a follower already forwarded this request.
func isForwarded(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, pb.MetadataForwarded) // no copy of the whole map
	return len(v) > 0 && v[0] == "1"
}

// onLeader runs local when this node leads, and otherwise re-issues the
// same RPC on the leader. local may also find that leadership moved before
// it proposed anything (a not-leader error): the call is then forwarded
// too. A forwarded request is never forwarded again: a node that gets one
// without leading answers Unavailable with its leader hint, and the client
// follows it.
//
// local must return a not-leader error only when nothing was applied;
// cluster guarantees it for Propose and ReadBarrier.
func onLeader[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	local func(context.Context) (Resp, error)) (Resp, error) {
	var zero Resp
	hint := ""
	if s.svc.IsLeader() {
		resp, err := local(ctx)
		if !errors.Is(err, errNotLeader) {
			return resp, err
		}
		hint = leaderHintOf(err)
	}
	if hint == "" {
		hint = s.svc.LeaderGRPCAddr()
	}
	if isForwarded(ctx) || hint == "" {
		return zero, &notLeaderError{LeaderGRPC: hint}
	}
	cc, err := s.fwd.Conn(hint)
	if err != nil {
		return zero, fmt.Errorf("forward to %s: %w", hint, err)
	}
	s.metrics.forwarded.WithLabelValues(method).Inc()
	if claims(method, req) {
		var cancel context.CancelFunc
		ctx, cancel = lagCancel(ctx)
		defer cancel()
	}
	fctx := forwardAuth(ctx, metadata.AppendToOutgoingContext(ctx, pb.MetadataForwarded, "1"))
	if id := s.node.Identity().ID(); id != "" {
		fctx = metadata.AppendToOutgoingContext(fctx, pb.MetadataCluster, id)
	}
	if err := cc.Invoke(fctx, method, req, out); err != nil {
		s.log.Debug("forward failed", "method", method, "leader", hint, "err", err)
		return zero, err
	}
	return out, nil
}
