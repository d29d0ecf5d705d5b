package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Server is Docket's gRPC server: the Queue and Cluster services, the gRPC
// health service and (Config.Reflection) server reflection, over one Node.
//
// New starts the health watcher; Stop ends it.
type Server struct {
	node    Node
	svc     *service.Service // the node's write and read paths
	cfg     Config
	log     *slog.Logger
	grpc    *grpc.Server
	health  *health.Server
	fwd     *peer.Pool
	metrics *metrics
	polls   *pollLimiter
	codec   *requestCodec
	hashes  *hashCache
	tokens  *tokenChecks // a follower's cache of the leader's answers about tokens
	guard   *connGuard

	// ctx ends once gRPC has stopped; the health watcher ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// spawnMu orders spawn's wg.Add before Stop's cancel and wg.Wait.
	spawnMu sync.Mutex

	stopOnce sync.Once
	stopErr  error

	// notServing is whether the node reported problems at the last
	// health check; the watcher logs when it flips, not on every check,
	// since the problems' text changes as they go on.
	notServing bool
}

// New builds a server over node and its Service svc. It registers the
// services on a new grpc.Server; call Serve to accept connections and Stop
// to end.
func New(node Node, svc *service.Service, cfg Config) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		node:    node,
		svc:     svc,
		cfg:     cfg,
		log:     cfg.Logger.With("component", "transport"),
		health:  health.NewServer(),
		fwd:     newForwarder(cfg.ForwardDialOptions),
		metrics: newMetrics(cfg.Registerer, cfg.Logger),
		codec:   newRequestCodec(),
		hashes:  newHashCache(cfg.HashInterval),
		tokens:  newTokenChecks(),
		guard:   newConnGuard(cfg.UnprovenTimeout, cfg.MaxUnproven, cfg.MaxUnprovenPerIP, cfg.UnprovenCallRate, cfg.Logger.With("component", "transport")),
		ctx:     ctx,
		cancel:  cancel,
	}
	s.polls = newPollLimiter(cfg.MaxLongPolls, cfg.MaxLongPollsPerConn)
	s.guard.register(cfg.Registerer, cfg.Logger)
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		// Answers are bounded by the FSM (MaxAnswerBytes); this makes an
		// answer that somehow passed the bound fail here, loudly, rather
		// than at a client that cannot receive it.
		grpc.MaxSendMsgSize(MaxAnswerBytes),
		// Docket's own headers (a token, a leader hint, the forwarded mark
		// and cluster id) fit in a few hundred bytes; a client sending
		// megabytes of headers, or thousands of them, is refused.
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		// A Claim answer gRPC could not send releases its tasks.
		grpc.StatsHandler(claimWatch{s}),
		// Puts each connection's guard entry in its calls' contexts.
		grpc.StatsHandler(s.guard),
		// Idle connections cost their buffers: a smaller read buffer
		// (gRPC's write buffer is pooled, taken only while writing).
		grpc.ReadBufferSize(DefaultReadBufferSize),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		// A request that does not decode is InvalidArgument (codec.go).
		grpc.ForceServerCodecV2(s.codec),
		grpc.ChainStreamInterceptor(s.codec.streamInterceptor, s.authStream),
		// HTTP/2 flow-control windows sized for a LAN: one client
		// connection carries every caller of a process (see WindowSize).
		grpc.InitialWindowSize(WindowSize),
		grpc.InitialConnWindowSize(ConnWindowSize),
		// Calls run on kept goroutines: a call on a fresh one grows and
		// copies its stack on the way down the handler, 6 % of a leader's
		// CPU at 16 callers (BENCHMARKS.md). A call that finds every worker
		// busy (long polls hold theirs) gets a goroutine of its own, as
		// without workers.
		grpc.NumStreamWorkers(streamWorkers()),
	}, cfg.serverLimits()...)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(limitHandshakes(cfg.TLS.ServerCredentials(cfg.ClientAuth), cfg.MaxHandshakes, cfg.HandshakeTimeout)))
	}
	opts = append(opts, cfg.ServerOptions...)
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterQueueServer(s.grpc, &queueService{s: s})
	pb.RegisterClusterServer(s.grpc, &clusterService{s: s})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	if cfg.Reflection {
		reflection.Register(s.grpc)
	}

	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pb.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.setQueueHealth()

	s.wg.Add(1)
	go s.watchHealth()
	return s
}

// ServiceNode is a member that hands out its own Service, as an
// in-process stand-in (cluster/memnode) does.
type ServiceNode interface {
	Node
	Service() *service.Service
}

// NewServer is New over a member that hands out its own Service: the
// short form for tests and embedders that hold one stand-in node.
func NewServer(node ServiceNode, cfg Config) *Server { return New(node, node.Service(), cfg) }

// GRPC returns the underlying server, for registering more services
// before Serve.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Stop. It returns nil after Stop.
// Connections are guarded until they carry an authenticated call
// (connguard.go).
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(s.guard.listener(lis))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop ends the server: health turns NOT_SERVING, the node's long polls
// return (Node.Drain), gRPC stops gracefully (in-flight calls finish) until
// ctx ends and then hard, the health watcher ends and the forwarding
// connections close. It is safe to call more than once.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.health.Shutdown()
		s.svc.Drain()
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
			<-done
		}
		s.spawnMu.Lock()
		s.cancel()
		s.spawnMu.Unlock()
		s.wg.Wait()
		s.stopErr = s.fwd.Close()
	})
	return s.stopErr
}

// unaryInterceptor maps every handler error to a gRPC status (toStatus) and
// puts the leader's address in the header and trailer of every answer.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	var resp any
	err := s.codec.take(req)
	if err == nil {
		err = s.checkPeerCluster(ctx)
	}
	if err == nil {
		ctx, err = s.authorize(ctx, info.FullMethod, req)
	}
	// Refused calls too: a loop of them costs as much as any.
	if gerr := s.noteCall(ctx, info.FullMethod, err); err == nil {
		err = gerr
	}
	if err == nil {
		err = s.refuseUnchecked(info.FullMethod)
	}
	if err == nil {
		resp, err = handler(ctx, req)
	}
	leader := leaderHintOf(err)
	if leader == "" {
		leader = s.svc.LeaderGRPCAddr()
	}
	if leader != "" {
		md := metadata.Pairs(pb.MetadataLeader, leader)
		// Both fail only for a stream whose header was already sent,
		// which a unary call's interceptor never meets.
		_ = grpc.SetHeader(ctx, md)
		_ = grpc.SetTrailer(ctx, md)
	}
	serr := toStatus(err)
	code := status.Code(serr)
	if code == codes.Internal || code == codes.Unknown {
		s.log.Error("rpc failed", "method", info.FullMethod, "err", err)
	}
	s.metrics.observe(info.FullMethod, code, time.Since(start))
	return resp, serr
}

// watchHealth keeps the Queue service's health in step with whether a
// leader is known: a load balancer can then prefer nodes that can serve.
func (s *Server) watchHealth() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.setQueueHealth()
		case <-s.ctx.Done():
			return
		}
	}
}

// setQueueHealth sets the Queue service's health from whether a leader is
// known, and both the Queue service's and the node's ("") from the node's
// own problems: a node that cannot write or apply must not be chosen by a
// load balancer. The Cluster service stays SERVING, so an operator can
// still reach Status. Called from NewServer and then only by watchHealth.
func (s *Server) setQueueHealth() {
	problems := s.node.HealthProblems()
	if bad := len(problems) > 0; bad != s.notServing {
		if bad {
			s.log.Error("node not serving", "problems", problems)
		} else {
			s.log.Info("node serving again")
		}
		s.notServing = bad
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if len(problems) == 0 && (s.svc.IsLeader() || s.svc.LeaderGRPCAddr() != "") {
		st = healthpb.HealthCheckResponse_SERVING
	}
	// A node that diverged, or awaits a consistency check after a restart,
	// is NOT_SERVING as a whole, not only for the Queue service; so is one
	// that reports problems (log writes, Pebble, stuck apply).
	node := healthpb.HealthCheckResponse_SERVING
	if len(problems) > 0 || s.node.CheckErr() != nil {
		st, node = healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	}
	// After Shutdown (Stop) the health server ignores updates.
	s.health.SetServingStatus(pb.Queue_ServiceDesc.ServiceName, st)
	s.health.SetServingStatus("", node)
}

// refuseUnchecked refuses the Queue service's calls while the consistency
// checks do not let this node serve: its keyspace may be damaged, so even a
// stale read or a forwarded write's answer could be wrong. The Cluster
// service stays open (operators and the leader's check need Status), and
// so do health and reflection.
func (s *Server) refuseUnchecked(method string) error {
	if !strings.HasPrefix(method, "/"+pb.Queue_ServiceDesc.ServiceName+"/") {
		return nil
	}
	return s.node.CheckErr()
}

// streamWorkers is how many goroutines the gRPC server keeps to run calls
// on: enough for the calls one core's share of callers keeps waiting on a
// commit, and idle ones cost a parked goroutine each.
func streamWorkers() uint32 {
	return uint32(max(32, 16*runtime.GOMAXPROCS(0)))
}
