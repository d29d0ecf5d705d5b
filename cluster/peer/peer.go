package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// StatusTimeout bounds one Cluster.Status call to a peer.
const StatusTimeout = time.Second

// ErrClosed means the pool was closed: its owner is stopping.
var ErrClosed = errors.New("peer pool closed")

// Pool keeps one client connection per peer address. It is safe for
// concurrent use.
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New returns an empty pool that dials with opts.
func New(opts ...grpc.DialOption) *Pool {
	return &Pool{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// Conn returns the connection to addr, creating it on first use.
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, errors.New("no gRPC address known")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

// Status asks the node at addr for its Status, within StatusTimeout.
func (p *Pool) Status(ctx context.Context, addr string, req *pb.StatusRequest) (*pb.StatusResponse, error) {
	cc, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	return pb.NewClusterClient(cc).Status(ctx, req)
}

// Close closes every connection; later calls get ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, cc := range p.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close conn to %s: %w", addr, err))
		}
	}
	p.conns = nil
	return errors.Join(errs...)
}
