package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// serverRow is one server of the Cluster page: the configuration's view
// of it, and its own Status when it answered.
type serverRow struct {
	*pb.Server
	Own *pb.StatusResponse
	Err string
}

// clusterPage shows the configuration as the local node knows it, and each
// server's own Status (Status is open: the viewer's token is checked
// first, so that a page behind a login shows nothing without one).
func (s *Server) clusterPage(v *view) {
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	if s.cfg.Auth {
		if err := s.checkToken(ctx); err != nil {
			s.toLogin(v.w, v.r)
			return
		}
	}
	local, err := pb.NewClusterClient(s.conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		s.fail(v, "cluster status", err)
		return
	}
	rows := make([]*serverRow, len(local.GetServers()))
	var wg sync.WaitGroup
	for i, srv := range local.GetServers() {
		rows[i] = &serverRow{Server: srv}
		wg.Go(func() { rows[i].Own, rows[i].Err = s.peerStatus(ctx, srv.GetGrpcAddr(), srv.GetId()) })
	}
	wg.Wait()
	voters, healthy := 0, 0
	for _, r := range rows {
		if r.GetSuffrage() != "voter" {
			continue
		}
		voters++
		if r.Own != nil && r.Own.GetConsistency().GetStatus() != "diverged" {
			healthy++
		}
	}
	s.renderView(v, http.StatusOK, "cluster", map[string]any{
		"Local": local, "Servers": rows, "Voters": voters, "Healthy": healthy,
		"Tolerance": healthy - (voters/2 + 1),
	})
}

// peerStatus asks one server for its own Status; the error is shown.
func (s *Server) peerStatus(ctx context.Context, addr, id string) (*pb.StatusResponse, string) {
	c, err := s.peer(addr)
	if err != nil {
		return nil, err.Error()
	}
	st, err := pb.NewClusterClient(c).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return nil, explain(err)
	}
	if st.GetNodeId() != id {
		return nil, fmt.Sprintf("%s answers as %q", addr, st.GetNodeId())
	}
	return st, ""
}

// statsPageLimit bounds the Stats pages one view follows: each page is up
// to 4 MiB, and a dashboard that needs more should filter by queue.
const statsPageLimit = 4

// queuesPage lists every queue and tenant the token grants (the API
// filters), with the totals the rate charts are drawn from.
func (s *Server) queuesPage(v *view) {
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	queue := v.r.URL.Query().Get("queue")
	var all []*pb.QueueStats
	cursor, truncated := "", false
	for i := 0; ; i++ {
		if i == statsPageLimit {
			truncated = true
			break
		}
		resp, err := pb.NewQueueClient(s.conn).Stats(ctx, &pb.StatsRequest{Queue: queue, Cursor: cursor})
		if err != nil {
			s.fail(v, "queue stats", err)
			return
		}
		all = append(all, resp.GetQueues()...)
		if cursor = resp.GetNextCursor(); cursor == "" {
			break
		}
	}
	// A token the API just accepted for Stats may sample the rates.
	s.rates.sawViewer(v.secret)
	sort.Slice(all, func(i, j int) bool {
		if all[i].GetQueue() != all[j].GetQueue() {
			return all[i].GetQueue() < all[j].GetQueue()
		}
		return all[i].GetTenant() < all[j].GetTenant()
	})
	var sum pb.QueueStats
	tenants := make([]string, 0, len(all))
	for _, q := range all {
		sum.Pending += q.GetPending()
		sum.Delayed += q.GetDelayed()
		sum.Waiting += q.GetWaiting()
		sum.Running += q.GetRunning()
		sum.Dead += q.GetDead()
		sum.Completed += q.GetCompleted()
		tenants = append(tenants, q.GetTenant())
	}
	admin := s.adminTenants(v, tenants)
	rows := make([]*queueRow, len(all))
	for i, q := range all {
		rows[i] = &queueRow{QueueStats: q, Rates: s.rates.series(q.GetQueue(), q.GetTenant()), Admin: admin[q.GetTenant()]}
	}
	s.renderView(v, http.StatusOK, "queues", map[string]any{"Queues": rows, "Sum": &sum, "Queue": queue,
		"Truncated": truncated, "Back": v.r.URL.RequestURI()})
}

// queueRow is one row of the Queues page: the queue's stats, its rate
// history, and whether the viewer may act on it.
type queueRow struct {
	*pb.QueueStats
	Rates rateSeries
	Admin bool
}

// taskPage looks one task up by id, in the tenant the viewer names (the
// default tenant when empty, as the API does with auth on).
func (s *Server) taskPage(v *view) {
	q := v.r.URL.Query()
	id, tenant := strings.TrimSpace(q.Get("id")), strings.TrimSpace(q.Get("tenant"))
	data := map[string]any{"ID": id, "Tenant": tenant}
	if id == "" {
		s.renderView(v, http.StatusOK, "task", data)
		return
	}
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	resp, err := s.findTask(ctx, id, tenant)
	if err != nil {
		s.fail(v, "task "+id, err)
		return
	}
	t := resp.GetTask()
	data["Task"] = t
	data["Applied"] = resp.GetAppliedIndex()
	if t.GetState() == pb.TaskState_TASK_STATE_RUNNING || t.GetLeaseUntil() != 0 {
		// A heartbeat sets lease_until = now + lease, so its time is
		// lease_until - lease: the last renewal, claim or heartbeat.
		data["Renewed"] = t.GetLeaseUntil() - t.GetLeaseNs()
	}
	// The fence column appears when the API showed this viewer a past
	// fence (an admin of the tenant, or auth off); the template never
	// renders the running attempt's.
	for _, a := range t.GetHistory() {
		if a.GetEndedAt() != 0 && a.GetFence() != 0 {
			data["PastFences"] = true
		}
	}
	if len(t.GetParents()) > 0 {
		// The parents' states, in the child's order; a refusal or an
		// older cluster leaves the plain ids.
		pr, err := pb.NewQueueClient(s.conn).ParentResults(ctx, &pb.ParentResultsRequest{TaskId: id, Tenant: t.GetTenant(), AllowStale: true})
		if err == nil {
			data["Parents"] = pr.GetParents()
		} else {
			s.log.Debug("dashboard parent results", "task", id, "err", err)
		}
	}
	data["Admin"] = s.adminOf(v, t.GetTenant())
	data["Back"] = v.r.URL.RequestURI()
	s.renderView(v, http.StatusOK, "task", data)
}

// findTask reads a task. When the viewer named no tenant (the header's
// search box names none) and the default tenant has no such task, or the
// token does not cover it, the tenants of the viewer's queues are tried
// in turn, up to maxProbedTenants of them.
func (s *Server) findTask(ctx context.Context, id, tenant string) (*pb.GetTaskResponse, error) {
	qc := pb.NewQueueClient(s.conn)
	resp, err := qc.GetTask(ctx, &pb.GetTaskRequest{TaskId: id, Tenant: tenant})
	if c := status.Code(err); tenant != "" || c != codes.NotFound && c != codes.PermissionDenied {
		return resp, err
	}
	st, serr := qc.Stats(ctx, &pb.StatsRequest{})
	if serr != nil {
		return resp, err
	}
	tried := map[string]bool{"": true, pb.DefaultTenant: true}
	for _, q := range st.GetQueues() {
		tn := q.GetTenant()
		if tried[tn] || len(tried) >= maxProbedTenants+2 {
			continue
		}
		tried[tn] = true
		if r, e := qc.GetTask(ctx, &pb.GetTaskRequest{TaskId: id, Tenant: tn}); e == nil {
			return r, nil
		}
	}
	return resp, err
}

// deadPageSize is how many dead letters one queue's table lists.
const deadPageSize = 50

// deadQueues bounds the queues the Dead letters page lists without a
// filter: the first this many with dead letters, each with its first
// deadPageSize.
const deadQueues = 20

// deadGroup is one queue's dead letters on the Dead letters page.
type deadGroup struct {
	Queue, Tenant string
	Count         uint64
	Tasks         []*pb.Task
	Next          string
	Admin         bool
}

// deadPage lists dead letters: of the queue named, a page at a time, or
// of every queue the viewer's Stats shows dead letters in. It reads them
// with ListTasks, which a reader may call (ListDead needs admin).
func (s *Server) deadPage(v *view) {
	q := v.r.URL.Query()
	queue, tenant, cursor := strings.TrimSpace(q.Get("queue")), strings.TrimSpace(q.Get("tenant")), q.Get("cursor")
	data := map[string]any{"Queue": queue, "Tenant": tenant, "Done": q.Get("done"), "Failed": q.Get("failed"), "Back": v.r.URL.RequestURI()}
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	qc := pb.NewQueueClient(s.conn)
	if queue != "" && tenant == "" {
		tenant = pb.DefaultTenant
	}
	refs, truncated, err := queuesOf(ctx, qc, queue, tenant, (*pb.QueueStats).GetDead, deadQueues)
	if err != nil {
		s.fail(v, "queue stats", err)
		return
	}
	if truncated {
		data["Truncated"] = true
	}
	groups := make([]*deadGroup, len(refs))
	for i, r := range refs {
		groups[i] = &deadGroup{Queue: r.Queue, Tenant: r.Tenant, Count: r.Count}
	}
	for _, g := range groups {
		resp, err := qc.ListTasks(ctx, &pb.ListTasksRequest{Queue: g.Queue, Tenant: g.Tenant, State: pb.TaskState_TASK_STATE_DEAD,
			Cursor: cursor, Limit: deadPageSize})
		if err != nil {
			s.fail(v, "dead letters of "+g.Queue, err)
			return
		}
		g.Tasks, g.Next = resp.GetTasks(), resp.GetNextCursor()
		g.Admin = s.adminOf(v, g.Tenant)
	}
	data["Groups"] = groups
	s.renderView(v, http.StatusOK, "dead", data)
}

// requeueAllLimit is the most one "requeue all" moves: the API's batch.
const requeueAllLimit = 1000

// requeue moves the selected dead letters (by id), or up to
// requeueAllLimit of the queue, back to pending. The API decides whether
// the token may (admin; by id, over every tenant).
func (s *Server) requeue(v *view) {
	f := v.r.PostForm
	queue, tenant := f.Get("queue"), f.Get("tenant")
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	qc := pb.NewQueueClient(s.conn)
	var items []*pb.ItemResult
	if f.Get("all") != "" {
		resp, err := qc.RequeueDead(ctx, &pb.RequeueDeadRequest{Queue: queue, Tenant: tenant, Limit: requeueAllLimit})
		if err != nil {
			s.fail(v, "requeue "+queue, err)
			return
		}
		items = resp.GetItems()
	} else {
		ids := f["id"]
		if len(ids) == 0 || len(ids) > deadPageSize {
			http.Error(v.w, fmt.Sprintf("select 1 to %d tasks", deadPageSize), http.StatusBadRequest)
			return
		}
		for _, id := range ids {
			resp, err := qc.RequeueDead(ctx, &pb.RequeueDeadRequest{TaskId: id})
			if err != nil {
				s.fail(v, "requeue "+id, err)
				return
			}
			items = append(items, resp.GetItems()...)
		}
	}
	done, failed := 0, 0
	for _, it := range items {
		if it.GetCode() == pb.Code_CODE_OK {
			done++
		} else {
			failed++
		}
	}
	back := url.Values{"queue": {queue}, "tenant": {tenant}, "done": {strconv.Itoa(done)}, "failed": {strconv.Itoa(failed)}}
	http.Redirect(v.w, v.r, "/dead?"+back.Encode(), http.StatusSeeOther)
}
