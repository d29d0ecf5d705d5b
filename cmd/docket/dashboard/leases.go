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
	var groups []*leaseGroup
	truncated := false
	if queue != "" {
		groups = append(groups, &leaseGroup{Queue: queue, Tenant: tenant})
	} else {
		resp, err := qc.Stats(ctx, &pb.StatsRequest{})
		if err != nil {
			s.fail(v, "queue stats", err)
			return
		}
		for _, st := range resp.GetQueues() {
			if st.GetRunning() == 0 {
				continue
			}
			if len(groups) == leaseQueues {
				truncated = true
				break
			}
			groups = append(groups, &leaseGroup{Queue: st.GetQueue(), Tenant: st.GetTenant()})
		}
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
