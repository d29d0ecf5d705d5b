package transport

import (
	"context"
	"testing"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkEnqueueAuth measures what the auth interceptor adds to an
// Enqueue over loopback gRPC (one hash and one local Pebble Get per call):
// off, and on with a producer token.
func BenchmarkEnqueueAuth(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			node := newMemNode(b, true, service.ServiceConfig{})
			ts := mustServe(b, node, "", Config{Auth: on})
			ctx := context.Background()
			if on {
				if err := node.Service().Bootstrap(ctx, adminSecret); err != nil {
					b.Fatal(err)
				}
				ctx = as(ctx, adminSecret)
			}
			req := &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a", Payload: []byte("x")}}}
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				for p.Next() {
					if _, err := ts.q.Enqueue(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
