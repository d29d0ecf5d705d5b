package dashboard

import (
	"context"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// topKeysShown is how many keys of each list the Queue page shows.
const topKeysShown = 10

// keysOf reads a queue's top keys by backlog and by running (ListKeys,
// reader or admin) for the Queue page of a fair queue. It is context,
// not the page's subject: a refusal (an older cluster without the call, a
// token without reader) leaves it out, and nil or an unkeyed answer shows
// nothing.
func (s *Server) keysOf(ctx context.Context, queue, tenant string) *pb.ListKeysResponse {
	resp, err := pb.NewQueueClient(s.conn).ListKeys(ctx, &pb.ListKeysRequest{Queue: queue, Tenant: tenant, Limit: topKeysShown})
	if err != nil {
		s.log.Debug("dashboard keys", "queue", queue, "tenant", tenant, "err", err)
		return nil
	}
	if !resp.GetKeyed() {
		return nil
	}
	return resp
}
