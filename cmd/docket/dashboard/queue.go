package dashboard

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// queuePageSize is how many tasks one page of a queue's state lists.
const queuePageSize = 50

// listedStates are the states a queue indexes, so ListTasks pages through
// them, in the order the Queue page's tabs show them.
var listedStates = []pb.TaskState{
	pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED, pb.TaskState_TASK_STATE_WAITING,
	pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_DEAD,
}

// stateTab is one state of the Queue page's tabs: its name and count.
type stateTab struct {
	Name  string
	Count uint64
	On    bool
}

// queuePage shows one queue of a tenant: its counts by state as tabs, its
// configuration (paused, limits), its actions for an admin, and a page of
// its tasks in the chosen state (Queue.ListTasks, which a reader may call).
func (s *Server) queuePage(v *view) {
	q := v.r.URL.Query()
	queue, tenant := strings.TrimSpace(q.Get("queue")), strings.TrimSpace(q.Get("tenant"))
	if queue == "" {
		http.Redirect(v.w, v.r, "/queues", http.StatusSeeOther)
		return
	}
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	state := stateNamed(q.Get("state"))
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	qc := pb.NewQueueClient(s.conn)
	stats, err := qc.Stats(ctx, &pb.StatsRequest{Queue: queue, Tenant: tenant})
	if err != nil {
		s.fail(v, "queue "+queue, err)
		return
	}
	s.rates.sawViewer(v.secret) // the API accepted it for Stats
	st := &pb.QueueStats{Queue: queue, Tenant: tenant}
	for _, x := range stats.GetQueues() {
		if x.GetQueue() == queue && x.GetTenant() == tenant {
			st = x
		}
	}
	counts := map[pb.TaskState]uint64{
		pb.TaskState_TASK_STATE_PENDING: st.GetPending(), pb.TaskState_TASK_STATE_DELAYED: st.GetDelayed(),
		pb.TaskState_TASK_STATE_WAITING: st.GetWaiting(), pb.TaskState_TASK_STATE_RUNNING: st.GetRunning(),
		pb.TaskState_TASK_STATE_DEAD: st.GetDead(),
	}
	tabs := make([]stateTab, len(listedStates))
	for i, ls := range listedStates {
		tabs[i] = stateTab{Name: stateName(ls), Count: counts[ls], On: ls == state}
	}
	list, err := qc.ListTasks(ctx, &pb.ListTasksRequest{Queue: queue, Tenant: tenant, State: state, Cursor: q.Get("cursor"), Limit: queuePageSize})
	if err != nil {
		s.fail(v, stateName(state)+" tasks of "+queue, err)
		return
	}
	orphans := map[string]bool{}
	for _, id := range list.GetOrphanedTaskIds() {
		orphans[id] = true
	}
	s.renderView(v, http.StatusOK, "queue", map[string]any{
		"Schedules": s.schedulesOf(ctx, queue, tenant),
		"Keys":      s.keysOf(ctx, queue, tenant), // keys.go: a fair queue's top keys
		"Queue":     queue, "Tenant": tenant, "Stats": st, "Tabs": tabs, "State": stateName(state),
		"Tasks": list.GetTasks(), "Next": list.GetNextCursor(), "First": q.Get("cursor") != "", "Orphans": orphans,
		"Admin": s.adminOf(v, tenant), "Back": v.r.URL.RequestURI(), "Rates": s.rates.series(queue, tenant),
	})
}

// scheduleRow is a schedule of the queue and its next slot.
type scheduleRow struct {
	*pb.Schedule
	Next int64 // Unix ns; 0 when the spec does not parse here
}

// schedulePages bounds the ListSchedules pages the Queue page reads.
const schedulePages = 4

// schedulesOf lists the tenant's schedules that enqueue into queue, with
// their next slot as the leader will compute it (fsm's cron rules). The
// list is read from the local replica: it is context, not the page's
// subject, and a refusal (a token without reader) leaves it out.
func (s *Server) schedulesOf(ctx context.Context, queue, tenant string) []scheduleRow {
	var out []scheduleRow
	cursor := ""
	for range schedulePages {
		resp, err := pb.NewQueueClient(s.conn).ListSchedules(ctx, &pb.ListSchedulesRequest{Tenant: tenant, Cursor: cursor, Stale: true})
		if err != nil {
			s.log.Debug("dashboard schedules", "queue", queue, "err", err)
			return out
		}
		for _, sc := range resp.GetSchedules() {
			if sc.GetQueue() != queue {
				continue
			}
			row := scheduleRow{Schedule: sc}
			if spec, err := fsm.ParseCronSpec(sc.GetSpec(), sc.GetZone()); err == nil {
				row.Next = spec.Next(max(time.Now().UnixNano(), sc.GetLastSlot()))
			}
			out = append(out, row)
		}
		if cursor = resp.GetNextCursor(); cursor == "" {
			break
		}
	}
	return out
}

// stateNamed is the listed state a URL names, pending when none or
// another.
func stateNamed(name string) pb.TaskState {
	for _, ls := range listedStates {
		if stateName(ls) == name {
			return ls
		}
	}
	return pb.TaskState_TASK_STATE_PENDING
}

func stateName(s pb.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATE_"))
}
