package transport

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// FuzzFairQueueRequests feeds the same bytes as a SetKeyLimit, a ListKeys
// and a SetQueueLimits request. Each either answers or is refused with
// InvalidArgument naming a field (FailedPrecondition only for a state:
// a feature level); none fails otherwise, whatever the key's bytes,
// the enums' values or the bounds.
func FuzzFairQueueRequests(f *testing.F) {
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&pb.SetKeyLimitRequest{Queue: "q", Key: []byte("acme"), MaxRunning: u32p(2), Weight: u32p(3)})
	seed(&pb.SetKeyLimitRequest{Queue: "q", Key: make([]byte, 300)})
	seed(&pb.ListKeysRequest{Queue: "q", Limit: 5000})
	seed(&pb.SetQueueLimitsRequest{Queue: "q", MaxRunningPerKey: u32p(2), Order: orderp(pb.QueueOrder_QUEUE_ORDER_FAIR),
		PerKeyPending: pendingp(pb.PerKeyPending_PER_KEY_PENDING_KEEP_NEWEST), PerKeyPendingDepth: u32p(1)})
	seed(&pb.SetQueueLimitsRequest{Order: orderp(-1), PerKeyPendingDepth: u32p(1 << 31)})
	f.Add([]byte{0x1a, 0x00, 0x20, 0x00})

	ts := mustServe(f, newMemNode(f, true, service.ServiceConfig{}), "", Config{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		calls := []struct {
			req  proto.Message
			call func(proto.Message) error
		}{
			{&pb.SetKeyLimitRequest{}, func(m proto.Message) error {
				_, err := ts.q.SetKeyLimit(ctx, m.(*pb.SetKeyLimitRequest))
				return err
			}},
			{&pb.ListKeysRequest{}, func(m proto.Message) error {
				_, err := ts.q.ListKeys(ctx, m.(*pb.ListKeysRequest))
				return err
			}},
			{&pb.SetQueueLimitsRequest{}, func(m proto.Message) error {
				_, err := ts.q.SetQueueLimits(ctx, m.(*pb.SetQueueLimitsRequest))
				return err
			}},
		}
		for _, c := range calls {
			if proto.Unmarshal(data, c.req) != nil {
				continue // the codec refuses it before the handler runs
			}
			err := c.call(c.req)
			switch code := status.Code(err); code {
			case codes.OK, codes.FailedPrecondition:
			case codes.InvalidArgument:
				if _, _, field := details(err); field == "" {
					t.Fatalf("%T %v: InvalidArgument names no field: %v", c.req, c.req, err)
				}
			default:
				t.Fatalf("%T %v: %v (%v), want an answer or InvalidArgument", c.req, c.req, code, err)
			}
		}
	})
}
