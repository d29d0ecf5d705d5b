package dashboard

import (
	"context"
	"net/http"
	"strings"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// leaseGroup is the running tasks of one queue and tenant.
type leaseGroup struct {
	Queue, Tenant string
	Tasks         []*pb.Task
	More          bool
	// Orphans are the tasks whose claim's answer the leader saw go
	// undelivered: running, but nobody works on them.
	Orphans map[string]bool
}

// Bounds of the Live leases page: queues listed without a filter, and
// running tasks listed per queue.
const (
	leaseQueues = 20
	leaseTasks  = 100
)

// leasesPage lists running tasks (Queue.ListTasks): of the queue named, or
// of every queue the Stats of the token show running tasks in.
func (s *Server) leasesPage(v *view) {
	q := v.r.URL.Query()
	queue, tenant := strings.TrimSpace(q.Get("queue")), strings.TrimSpace(q.Get("tenant"))
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	qc := pb.NewQueueClient(s.conn)
	refs, truncated, err := queuesOf(ctx, qc, queue, tenant, (*pb.QueueStats).GetRunning, leaseQueues)
	if err != nil {
		s.fail(v, "queue stats", err)
		return
	}
	groups := make([]*leaseGroup, len(refs))
	for i, r := range refs {
		groups[i] = &leaseGroup{Queue: r.Queue, Tenant: r.Tenant}
	}
	for _, g := range groups {
		resp, err := qc.ListTasks(ctx, &pb.ListTasksRequest{Queue: g.Queue, Tenant: g.Tenant,
			State: pb.TaskState_TASK_STATE_RUNNING, Limit: leaseTasks})
		if err != nil {
			s.fail(v, "running tasks of "+g.Queue, err)
			return
		}
		g.Tasks, g.More = resp.GetTasks(), resp.GetNextCursor() != ""
		for _, id := range resp.GetOrphanedTaskIds() {
			if g.Orphans == nil {
				g.Orphans = map[string]bool{}
			}
			g.Orphans[id] = true
		}
	}
	s.renderView(v, http.StatusOK, "leases", map[string]any{"Queue": queue, "Tenant": tenant, "Groups": groups,
		"Truncated": truncated, "NowNs": time.Now().UnixNano()})
}

// queueRef is a queue of a tenant, with the count of tasks Stats showed
// it in the state a page lists.
type queueRef struct {
	Queue, Tenant string
	Count         uint64
}

// queuesOf is the queues a page of tasks in one state lists: the queue
// named (Count unknown), or else the first most of those whose Stats show
// count > 0, with truncated when more had some.
func queuesOf(ctx context.Context, qc pb.QueueClient, queue, tenant string, count func(*pb.QueueStats) uint64,
	most int) (refs []queueRef, truncated bool, err error) {
	if queue != "" {
		return []queueRef{{Queue: queue, Tenant: tenant}}, false, nil
	}
	resp, err := qc.Stats(ctx, &pb.StatsRequest{})
	if err != nil {
		return nil, false, err
	}
	for _, st := range resp.GetQueues() {
		n := count(st)
		if n == 0 {
			continue
		}
		if len(refs) == most {
			return refs, true, nil
		}
		refs = append(refs, queueRef{Queue: st.GetQueue(), Tenant: st.GetTenant(), Count: n})
	}
	return refs, false, nil
}
