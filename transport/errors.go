package transport

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The cluster errors this package branches on.
var (
	errNotLeader      = replica.ErrNotLeader
	errLeadershipLost = replica.ErrLeadershipLost
	errShutdown       = replica.ErrShutdown
	errDiverged       = check.ErrDiverged
	errAwaitingCheck  = check.ErrAwaitingCheck
)

// notLeaderError is not-leader with a hint of where the leader is.
type notLeaderError = replica.NotLeaderError

// leaderHintOf returns the leader address a not-leader error carries.
func leaderHintOf(err error) string {
	var nle *notLeaderError
	if errors.As(err, &nle) {
		return nle.LeaderGRPC
	}
	return ""
}

// toStatus is the one place where errors become gRPC statuses. Handlers
// return domain errors (cluster's own and its names for the FSM's
// outcomes, context) and the server's unary interceptor maps them here. A status that is already a gRPC status (the
// leader's answer to a forwarded call) passes through unchanged.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var grpcErr interface{ GRPCStatus() *status.Status }
	var fe *pb.FieldError
	var de *decodeError
	switch {
	case errors.As(err, &de):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &grpcErr):
		return grpcErr.GRPCStatus().Err()
	case errors.As(err, &fe):
		code := codes.InvalidArgument
		if pb.IsTooLarge(fe) {
			code = codes.ResourceExhausted
		}
		return withDetail(code, err.Error(), &errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.Field, Description: fe.Reason}},
		})
	case errors.Is(err, service.ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, peer.ErrOtherCluster):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, service.ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, service.ErrBootstrapped):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, pb.ErrNotFound), errors.Is(err, cluster.ErrUnknownServer):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, pb.ErrStaleFence):
		return withDetail(codes.FailedPrecondition, err.Error(), errorInfo(pb.ReasonStaleFence, nil))
	case errors.Is(err, cluster.ErrBadBackup):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, service.ErrFeatureDisabled):
		return withDetail(codes.FailedPrecondition, err.Error(), errorInfo(pb.ReasonFeatureDisabled, nil))
	case errors.Is(err, cluster.ErrLastVoter), errors.Is(err, cluster.ErrTransferTimedOut):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, pb.ErrWrongState):
		return withDetail(codes.FailedPrecondition, err.Error(), errorInfo(pb.ReasonWrongState, nil))
	case errors.Is(err, pb.ErrTimedOut):
		return withDetail(codes.FailedPrecondition, err.Error(), errorInfo(pb.ReasonTimedOut, nil))
	case errors.Is(err, pb.ErrCancelled):
		return withDetail(codes.FailedPrecondition, err.Error(), errorInfo(pb.ReasonCancelled, nil))
	case errors.Is(err, pb.ErrTenantLimit):
		return withDetail(codes.ResourceExhausted, err.Error(), errorInfo(pb.ReasonTenantLimit, nil))
	case errors.Is(err, service.ErrMemoryLimit):
		return withDetail(codes.ResourceExhausted, err.Error(), errorInfo(pb.ReasonMemoryLimit, nil))
	case errors.Is(err, errLeadershipLost):
		return withDetail(codes.Unavailable, err.Error(), errorInfo(pb.ReasonLeadershipLost, nil))
	case errors.Is(err, errNotLeader):
		var md map[string]string
		if l := leaderHintOf(err); l != "" {
			md = map[string]string{pb.ErrorInfoLeaderKey: l}
		}
		return withDetail(codes.Unavailable, err.Error(), errorInfo(pb.ReasonNotLeader, md))
	case errors.Is(err, ErrTokenUnchecked):
		// No ErrorInfo: a NOT_LEADER reason would promise a leader to
		// follow, and there is none to name.
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, ErrOverloaded):
		return withDetail(codes.Unavailable, err.Error(), errorInfo(pb.ReasonOverloaded, nil))
	case errors.Is(err, errShutdown), errors.Is(err, peer.ErrClosed):
		return withDetail(codes.Unavailable, err.Error(), errorInfo(pb.ReasonShuttingDown, nil))
	case errors.Is(err, errDiverged), errors.Is(err, errAwaitingCheck):
		return withDetail(codes.Unavailable, err.Error(), errorInfo(pb.ReasonNotServing, nil))
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func errorInfo(reason string, md map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: pb.ErrorDomain, Metadata: md}
}

func withDetail(code codes.Code, msg string, detail protoadapt.MessageV1) error {
	st, err := status.New(code, msg).WithDetails(detail)
	if err != nil { // only if the detail cannot be marshalled
		return status.Error(code, msg)
	}
	return st.Err()
}

// fieldError is a transport-level bad value, mapped like the FSM's own.
func fieldError(field, reason string) error { return &pb.FieldError{Field: field, Reason: reason} }
