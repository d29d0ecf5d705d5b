package transport

import (
	"context"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// clusterService implements docket.v1.Cluster. Status answers from any
// node; membership and leadership changes run on the leader.
type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}

// Status is open without a token; with_hash is not, and is rate-limited
// (hashcache.go). check_index answers a hash the node already stored.
func (c *clusterService) Status(ctx context.Context, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	var st *pb.StatusResponse
	var err error
	if req.GetWithHash() {
		st, err = c.s.statusWithHash(ctx)
	} else {
		st, err = c.s.node.StatusWithHash(false)
	}
	if i := req.GetCheckIndex(); i != 0 && st != nil {
		st.CheckHash = c.s.node.CheckHash(i)
	}
	return st, err
}

func (c *clusterService) TransferLeadership(ctx context.Context, req *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	return onLeader(c.s, ctx, pb.Cluster_TransferLeadership_FullMethodName, req, &pb.TransferLeadershipResponse{},
		func(ctx context.Context) (*pb.TransferLeadershipResponse, error) {
			id, err := c.s.node.TransferLeadership(ctx, req.GetToId())
			if err != nil {
				return nil, err
			}
			return &pb.TransferLeadershipResponse{LeaderId: id}, nil
		})
}

func (c *clusterService) AddServer(ctx context.Context, req *pb.AddServerRequest) (*pb.AddServerResponse, error) {
	switch {
	case req.GetId() == "":
		return nil, fieldError("id", "required")
	case req.GetRaftAddr() == "":
		return nil, fieldError("raft_addr", "required")
	}
	return onLeader(c.s, ctx, pb.Cluster_AddServer_FullMethodName, req, &pb.AddServerResponse{},
		func(ctx context.Context) (*pb.AddServerResponse, error) {
			err := c.s.node.AddServer(ctx, req.GetId(), req.GetRaftAddr(), req.GetGrpcAddr(), req.GetNonvoter())
			if err != nil {
				return nil, err
			}
			return &pb.AddServerResponse{}, nil
		})
}

func (c *clusterService) RemoveServer(ctx context.Context, req *pb.RemoveServerRequest) (*pb.RemoveServerResponse, error) {
	if req.GetId() == "" {
		return nil, fieldError("id", "required")
	}
	return onLeader(c.s, ctx, pb.Cluster_RemoveServer_FullMethodName, req, &pb.RemoveServerResponse{},
		func(ctx context.Context) (*pb.RemoveServerResponse, error) {
			if err := c.s.node.RemoveServer(ctx, req.GetId()); err != nil {
				return nil, err
			}
			return &pb.RemoveServerResponse{}, nil
		})
}

// Leave runs on the node called, never forwarded: the operator names the
// node that leaves by calling it.
func (c *clusterService) Leave(ctx context.Context, _ *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	if err := c.s.node.Leave(ctx); err != nil {
		return nil, err
	}
	return &pb.LeaveResponse{}, nil
}

// CreateToken mints a token on the leader; the secret is in this answer
// only.
func (c *clusterService) CreateToken(ctx context.Context, req *pb.CreateTokenRequest) (*pb.CreateTokenResponse, error) {
	return onLeader(c.s, ctx, pb.Cluster_CreateToken_FullMethodName, req, &pb.CreateTokenResponse{},
		func(ctx context.Context) (*pb.CreateTokenResponse, error) {
			return c.s.svc.CreateToken(ctx, req)
		})
}

// RevokeToken deletes a token; NotFound when there is none.
func (c *clusterService) RevokeToken(ctx context.Context, req *pb.RevokeTokenRequest) (*pb.RevokeTokenResponse, error) {
	if req.GetAccessor() == "" {
		return nil, fieldError("accessor", "required")
	}
	return onLeader(c.s, ctx, pb.Cluster_RevokeToken_FullMethodName, req, &pb.RevokeTokenResponse{},
		func(ctx context.Context) (*pb.RevokeTokenResponse, error) {
			if err := c.s.svc.RevokeToken(ctx, req.GetAccessor()); err != nil {
				return nil, err
			}
			return &pb.RevokeTokenResponse{}, nil
		})
}

// ListTokens lists tokens, linearizably, without secrets or hashes.
func (c *clusterService) ListTokens(ctx context.Context, req *pb.ListTokensRequest) (*pb.ListTokensResponse, error) {
	return read(c.s, ctx, pb.Cluster_ListTokens_FullMethodName, req, &pb.ListTokensResponse{}, false,
		func(cs service.Consistency) (*pb.ListTokensResponse, error) {
			toks, err := c.s.svc.ListTokens(ctx, cs)
			if err != nil {
				return nil, err
			}
			return &pb.ListTokensResponse{Tokens: toks}, nil
		})
}
