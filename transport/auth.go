package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The auth interceptor. With Config.Auth on, every Queue and Cluster call
// but Cluster.Status carries "authorization: Bearer <secret>"; this file
// finds the token (service.Service.Authenticate, the local replica),
// names the tenants the request touches (filling an empty tenant with the
// default one, so the FSM re-checks it), and asks authorizeToken (roles.go) for
// each. Health and reflection are not Docket methods and stay open.
// cluster decides; this file only reads the request.

type tokenKey struct{}

// tokenOf is the caller's token, nil when auth is off or the method open.
func tokenOf(ctx context.Context) *pb.Token {
	t, _ := ctx.Value(tokenKey{}).(*pb.Token)
	return t
}

func docketMethod(method string) bool {
	return strings.HasPrefix(method, "/"+pb.Queue_ServiceDesc.ServiceName+"/") ||
		strings.HasPrefix(method, "/"+pb.Cluster_ServiceDesc.ServiceName+"/")
}

// bearer is the secret of the call's authorization metadata, "" if none.
func bearer(ctx context.Context) string {
	for _, v := range metadata.ValueFromIncomingContext(ctx, pb.MetadataAuthorization) {
		if s, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// authorize checks the call's token for method and the tenants of req,
// and returns ctx carrying the token. Unauthenticated: no, unknown,
// revoked or expired token. PermissionDenied: a valid token whose roles
// or tenants do not cover the call.
func (s *Server) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	if !s.cfg.Auth || !docketMethod(method) || openMethod(method) {
		return ctx, nil
	}
	if method == pb.Cluster_CheckToken_FullMethodName && !s.svc.IsLeader() {
		// Only a leader's answer about a token is final (tokencheck.go).
		return ctx, fmt.Errorf("check token: %w", &notLeaderError{LeaderGRPC: s.svc.LeaderGRPCAddr()})
	}
	tok, err := s.svc.Authenticate(bearer(ctx))
	if errors.Is(err, service.ErrUnknownToken) && !s.svc.IsLeader() && !isForwarded(ctx) {
		// A lagging replica may not hold a token the leader created a
		// moment ago (the harness saw reads refused so after a node was
		// wiped and rejoined), and a revoked token is unknown too. Only
		// the leader's answer is final: ask it (tokencheck.go).
		tok, err = s.askLeader(ctx, bearer(ctx))
	}
	if err != nil {
		return ctx, err
	}
	if method == pb.Cluster_CheckToken_FullMethodName {
		return context.WithValue(ctx, tokenKey{}, tok), nil // any valid token may ask about itself
	}
	tenants := requestTenants(req)
	if len(tenants) == 0 {
		tenants = []string{""}
	}
	for _, tn := range tenants {
		if err := authorizeToken(tok, method, tn); err != nil {
			return ctx, err
		}
	}
	return context.WithValue(ctx, tokenKey{}, tok), nil
}

// requestTenants fills an empty tenant with the default one in every
// request that names a task or a queue, so that the FSM and the reads
// compare it with the task's, and returns the tenants named. Stats keeps
// an empty tenant: it lists, and the answer is filtered (filterStats).
// RequeueDead by id names none: authorizeToken then needs "*".
func requestTenants(req any) []string {
	def := func(p *string) string {
		if *p == "" {
			*p = pb.DefaultTenant
		}
		return *p
	}
	switch r := req.(type) {
	case *pb.EnqueueRequest:
		out := make([]string, 0, 1)
		for _, t := range r.GetTasks() {
			if t != nil {
				out = appendNew(out, def(&t.Tenant))
			}
		}
		return out
	case *pb.ClaimRequest:
		return []string{def(&r.Tenant)}
	case *pb.ClaimBatchRequest:
		var out []string
		for _, it := range r.GetItems() {
			if it != nil {
				out = appendNew(out, def(&it.Tenant))
			}
		}
		return out
	case *pb.HeartbeatRequest:
		var out []string
		for _, it := range r.GetItems() {
			if it != nil {
				out = appendNew(out, def(&it.Tenant))
			}
		}
		return out
	case *pb.SubmitRequest:
		return []string{def(&r.Tenant)}
	case *pb.SubmitBatchRequest:
		var out []string
		for _, it := range r.GetItems() {
			if it != nil {
				out = appendNew(out, def(&it.Tenant))
			}
		}
		if r.GetClaim() != nil {
			out = appendNew(out, def(&r.Claim.Tenant))
		}
		return out
	case *pb.NackRequest:
		return []string{def(&r.Tenant)}
	case *pb.CancelRequest:
		return []string{def(&r.Tenant)}
	case *pb.GetTaskRequest:
		return []string{def(&r.Tenant)}
	case *pb.WaitResultRequest:
		return []string{def(&r.Tenant)}
	case *pb.StatsRequest:
		if r.GetTenant() == "" {
			return nil
		}
		return []string{r.GetTenant()}
	case *pb.ListDeadRequest:
		return []string{def(&r.Tenant)}
	case *pb.ListTasksRequest:
		return []string{def(&r.Tenant)}
	case *pb.PauseQueueRequest:
		return []string{def(&r.Tenant)}
	case *pb.ResumeQueueRequest:
		return []string{def(&r.Tenant)}
	case *pb.PurgeQueueRequest:
		return []string{def(&r.Tenant)}
	case *pb.PutScheduleRequest:
		if r.GetSchedule() == nil {
			r.Schedule = &pb.Schedule{}
		}
		return []string{def(&r.Schedule.Tenant)}
	case *pb.ListSchedulesRequest:
		return []string{def(&r.Tenant)}
	case *pb.RemoveScheduleRequest:
		return []string{def(&r.Tenant)}
	case *pb.SetQueueRetryRequest:
		return []string{def(&r.Tenant)}
	case *pb.ResetQueueRequest:
		return []string{def(&r.Tenant)}
	case *pb.SnoozeRequest:
		return []string{def(&r.Tenant)}
	case *pb.UpdateTaskRequest:
		return []string{def(&r.Tenant)}
	case *pb.ParentResultsRequest:
		return []string{def(&r.Tenant)}
	case *pb.SetQueueLimitsRequest:
		tn := def(&r.Tenant)
		if r.GetQueue() == "" {
			return nil // a tenant's own limit: admin over every tenant
		}
		return []string{tn}
	case *pb.SetKeyLimitRequest:
		return []string{def(&r.Tenant)}
	case *pb.ListKeysRequest:
		return []string{def(&r.Tenant)}
	case *pb.ReleaseClaimsRequest:
		var out []string
		for _, it := range r.GetItems() {
			if it != nil {
				out = appendNew(out, def(&it.Tenant))
			}
		}
		return out
	case *pb.RequeueDeadRequest:
		if r.GetTaskId() != "" {
			return nil
		}
		return []string{def(&r.Tenant)}
	}
	return nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// authStream is the stream half of the interceptor: the API has no
// streaming Docket method today, so any that appears is held to its role
// with no tenant (authorizeToken: closed unless listed).
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.checkPeerCluster(ss.Context()); err != nil {
		return toStatus(err)
	}
	ctx, err := s.authorize(ss.Context(), info.FullMethod, nil)
	if err != nil {
		return toStatus(err)
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authedStream) Context() context.Context { return a.ctx }

// forwardAuth passes the caller's authorization on to the leader, which
// checks it again: a follower's check is of a replica that may lag.
func forwardAuth(in, out context.Context) context.Context {
	for _, v := range metadata.ValueFromIncomingContext(in, pb.MetadataAuthorization) {
		out = metadata.AppendToOutgoingContext(out, pb.MetadataAuthorization, v)
	}
	return out
}

// hideFence is t as the caller's token may see it: service.TaskFor holds
// the rule (the current claim's fence only to its worker, past fences to
// admins of the task's tenant; nothing hidden with auth off).
func hideFence(ctx context.Context, t *pb.Task) *pb.Task { return service.TaskFor(tokenOf(ctx), t) }

// filterStats keeps the queues of the tenants the caller's token grants.
func filterStats(ctx context.Context, qs []*pb.QueueStats) []*pb.QueueStats {
	tok := tokenOf(ctx)
	if tok == nil {
		return qs
	}
	out := qs[:0]
	for _, q := range qs {
		if service.GrantsTenant(tok, q.GetTenant()) {
			out = append(out, q)
		}
	}
	return out
}

// checkPeerCluster refuses a call that another node sent on behalf of a
// different cluster (pb.MetadataCluster): a forwarded write or a status
// poll from a node of another cluster under the same CA.
func (s *Server) checkPeerCluster(ctx context.Context) error {
	v := metadata.ValueFromIncomingContext(ctx, pb.MetadataCluster)
	if len(v) == 0 {
		return nil
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	return s.node.Identity().Check("grpc", addr, v[0])
}
