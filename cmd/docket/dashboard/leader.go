package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// followLeader is the local connection's interceptor: a call the node
// answers NOT_LEADER (nothing was done) is made once more on the leader.
// A follower asks the leader about a token its replica does not know and
// answers with the leader's verdict; it answers NOT_LEADER when the node
// it asked leads no longer, and then the call goes where that answer
// points, so a login through a follower gets a verdict, not an error
// about leadership.
func (s *Server) followLeader(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if !isNotLeader(err) {
		return err
	}
	addr := leaderHint(err)
	if addr == "" {
		// The answer named no leader: the configuration may know it.
		st, serr := pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{})
		if serr != nil {
			return err
		}
		addr = st.GetLeaderGrpcAddr()
		for _, srv := range st.GetServers() {
			if addr == "" && srv.GetLeader() {
				addr = srv.GetGrpcAddr()
			}
		}
	}
	if addr == "" || addr == s.cfg.GRPCAddr {
		return err
	}
	c, perr := s.peer(addr)
	if perr != nil {
		return errors.Join(err, perr)
	}
	return c.Invoke(ctx, method, req, reply, opts...)
}

// isNotLeader reports a NOT_LEADER answer: Unavailable with that reason.
func isNotLeader(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	return errorInfo(st).GetReason() == pb.ReasonNotLeader
}

// leaderHint is the leader a NOT_LEADER answer names, "" when none.
func leaderHint(err error) string {
	st, _ := status.FromError(err)
	return errorInfo(st).GetMetadata()[pb.ErrorInfoLeaderKey]
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	if st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// explain turns an API error into a sentence for a person: what happened
// and, where there is one, what to do. The status message follows for
// the details.
func explain(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	reason := errorInfo(st).GetReason()
	switch {
	case st.Code() == codes.Unavailable && reason == pb.ReasonNotLeader:
		return "No leader is known right now (an election may be under way): try again in a few seconds."
	case st.Code() == codes.Unavailable && reason == pb.ReasonNotServing:
		return "This node does not serve now (it awaits a consistency check or diverged): try again, or use another node's dashboard. " + msg
	case st.Code() == codes.Unavailable && reason == pb.ReasonLeadershipLost:
		return "The leader changed during the call: whether it took effect is unknown. Reload to see. " + msg
	case st.Code() == codes.Unavailable:
		if strings.Contains(msg, "connection refused") {
			return "The node does not answer (connection refused): is it running?"
		}
		return "The node does not answer: is it running and reachable? (" + msg + ")"
	case st.Code() == codes.DeadlineExceeded:
		return fmt.Sprintf("The node did not answer within %v.", callTimeout)
	case st.Code() == codes.PermissionDenied:
		return "Not allowed for this token: " + msg
	case st.Code() == codes.FailedPrecondition && reason == pb.ReasonWrongState:
		return "The task is not in a state that allows this (it may have moved since the page was drawn): " + msg
	case st.Code() == codes.FailedPrecondition && reason == pb.ReasonFeatureDisabled:
		return "The cluster has not enabled the feature this needs (a server runs an older build): " + msg
	case st.Code() == codes.NotFound:
		return "Not found: " + msg
	}
	return st.Code().String() + ": " + msg
}

// backURL is where an action returns, and an error page's "back" link
// goes: the form's "back" field (the page the form was on; the pages send
// no Referer), when it is a path of this site, else the queues.
func backURL(r *http.Request) string {
	if r.Method != http.MethodPost {
		return r.URL.RequestURI()
	}
	b := r.PostFormValue("back")
	if u, err := url.Parse(b); err == nil && strings.HasPrefix(b, "/") && !strings.HasPrefix(b, "//") && !strings.ContainsRune(b, '\\') && u.Host == "" && u.Scheme == "" {
		return b
	}
	return "/queues"
}
