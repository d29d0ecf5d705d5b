package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Server is Docket's gRPC server: the Queue and Cluster services, the gRPC
// health service and server reflection, over one Node.
//
// NewServer starts background goroutines (the heartbeat batcher and the
// health watcher) and registers the FSM observer; Stop ends them all.
type Server struct {
	node    Node
	cfg     Config
	log     *slog.Logger
	grpc    *grpc.Server
	health  *health.Server
	hub     *hub
	hb      *batcher
	co      *coalescer
	gate    *claimGate
	fwd     *forwarder
	metrics *metrics
	codec   *requestCodec

	// drain is closed when Stop begins: long polls return at once so that
	// GracefulStop does not wait out their timers.
	drain chan struct{}
	// ctx ends once gRPC has stopped; background goroutines and in-flight
	// heartbeat proposals end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// NewServer builds a server over node. It registers the services on a new
// grpc.Server; call Serve to accept connections and Stop to end.
func NewServer(node Node, cfg Config) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		node:    node,
		cfg:     cfg,
		log:     cfg.Logger.With("component", "transport"),
		health:  health.NewServer(),
		fwd:     newForwarder(cfg.ForwardDialOptions),
		metrics: newMetrics(cfg.Registerer, cfg.Logger),
		codec:   newRequestCodec(),
		drain:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	s.hb = newBatcher(s)
	s.co = newCoalescer(s)
	s.gate = newClaimGate()
	s.hub = newHub(s.avail)
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		// A request that does not decode is InvalidArgument (codec.go).
		grpc.ForceServerCodecV2(s.codec),
		grpc.ChainStreamInterceptor(s.codec.streamInterceptor),
		// HTTP/2 flow-control windows sized for a LAN: one client
		// connection carries every caller of a process (see WindowSize).
		grpc.InitialWindowSize(WindowSize),
		grpc.InitialConnWindowSize(ConnWindowSize),
		// Permit the Go client's keepalive pings (every 10 s, also on idle
		// connections; client.DefaultKeepaliveTime). gRPC's default policy
		// (5 min, not without streams) answers them with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}, cfg.ServerOptions...)
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterQueueServer(s.grpc, &queueService{s: s})
	pb.RegisterClusterServer(s.grpc, &clusterService{s: s})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)

	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pb.Cluster_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.setQueueHealth()

	node.FSM().SetObserver(s.hub.observe)
	s.wg.Add(3)
	go s.hb.run()
	go s.co.run()
	go s.watchHealth()
	return s
}

// GRPC returns the underlying server, for registering more services
// before Serve.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Stop. It returns nil after Stop.
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop ends the server: health turns NOT_SERVING, long polls return, gRPC
// stops gracefully (in-flight calls finish) until ctx ends and then hard,
// the background goroutines end, the FSM observer is removed and the
// forwarding connections close. It is safe to call more than once.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.health.Shutdown()
		close(s.drain)
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
			<-done
		}
		s.cancel()
		s.wg.Wait()
		s.node.FSM().SetObserver(nil)
		s.stopErr = s.fwd.close()
	})
	return s.stopErr
}

// unaryInterceptor maps every handler error to a gRPC status (toStatus) and
// puts the leader's address in the header and trailer of every answer.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	err := s.codec.take(req)
	var resp any
	if err == nil {
		resp, err = handler(ctx, req)
	}
	leader := leaderHintOf(err)
	if leader == "" {
		leader = s.node.LeaderGRPCAddr()
	}
	if leader != "" {
		md := metadata.Pairs(LeaderMetadataKey, leader)
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

func (s *Server) setQueueHealth() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if s.node.IsLeader() || s.node.LeaderGRPCAddr() != "" {
		st = healthpb.HealthCheckResponse_SERVING
	}
	// After Shutdown (Stop) the health server ignores updates.
	s.health.SetServingStatus(pb.Queue_ServiceDesc.ServiceName, st)
}
