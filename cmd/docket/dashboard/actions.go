package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// An action is one POST form of the pages: it makes one API call with the
// viewer's token, then sends the viewer back to the page the form was on
// with a sentence saying what happened. A destructive one first shows a
// confirmation page that repeats the form with confirm=yes. The API
// decides whether the token may; a refusal is shown as the error page.
type action struct {
	name string
	// confirm, when set, is the question of the confirmation page.
	confirm func(f url.Values) string
	do      func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error)
}

// queueActions act on a queue of a tenant: fields queue and tenant.
var queueActions = []action{
	{name: "pause", do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
		resp, err := qc.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: f.Get("queue"), Tenant: f.Get("tenant")})
		if err != nil {
			return "", err
		}
		return changed(resp.GetChanged(), "Paused "+f.Get("queue")+": claims take nothing until it is resumed.", f.Get("queue")+" was paused already."), nil
	}},
	{name: "resume", do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
		resp, err := qc.ResumeQueue(ctx, &pb.ResumeQueueRequest{Queue: f.Get("queue"), Tenant: f.Get("tenant")})
		if err != nil {
			return "", err
		}
		return changed(resp.GetChanged(), "Resumed "+f.Get("queue")+".", f.Get("queue")+" was not paused."), nil
	}},
	{name: "purge",
		confirm: func(f url.Values) string {
			return fmt.Sprintf("Delete every pending and delayed task of queue %s (tenant %s)? Running and finished tasks stay. This cannot be undone.",
				f.Get("queue"), tenantName(f.Get("tenant")))
		},
		do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
			resp, err := qc.PurgeQueue(ctx, &pb.PurgeQueueRequest{Queue: f.Get("queue"), Tenant: f.Get("tenant")})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Purged %s: %s deleted.", f.Get("queue"), count(resp.GetPurged(), "pending or delayed task")), nil
		}},
	{name: "purge-dead",
		confirm: func(f url.Values) string {
			return fmt.Sprintf("Delete every dead letter of queue %s (tenant %s)? This cannot be undone.", f.Get("queue"), tenantName(f.Get("tenant")))
		},
		do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
			resp, err := qc.PurgeQueue(ctx, &pb.PurgeQueueRequest{Queue: f.Get("queue"), Tenant: f.Get("tenant"), Dead: true})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Deleted %s of %s.", count(resp.GetPurged(), "dead letter"), f.Get("queue")), nil
		}},
}

// taskActions act on one task: fields id and tenant.
var taskActions = []action{
	{name: "cancel",
		confirm: func(f url.Values) string {
			return fmt.Sprintf("Cancel task %s? A pending, delayed or waiting task ends cancelled now; a running one when its worker next heartbeats. It is never retried.", f.Get("id"))
		},
		do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
			resp, err := qc.Cancel(ctx, &pb.CancelRequest{TaskId: f.Get("id"), Tenant: f.Get("tenant")})
			if err != nil {
				return "", err
			}
			if resp.GetCancelRequested() {
				return "Cancel requested for " + f.Get("id") + ": its worker learns it at its next heartbeat.", nil
			}
			return "Cancelled " + f.Get("id") + ".", nil
		}},
	// retry runs a delayed task (one waiting out its backoff) now.
	{name: "retry", do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
		// The leader judges run_at against its own clock: a past time
		// makes the task pending at once.
		_, err := qc.UpdateTask(ctx, &pb.UpdateTaskRequest{TaskId: f.Get("id"), Tenant: f.Get("tenant"), RunAt: time.Now().Add(-time.Second).UnixNano()})
		if err != nil {
			return "", err
		}
		return "Task " + f.Get("id") + " runs now: it is pending.", nil
	}},
	// requeue moves a dead letter back to pending, with its attempts reset.
	{name: "requeue", do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
		resp, err := qc.RequeueDead(ctx, &pb.RequeueDeadRequest{TaskId: f.Get("id")})
		if err != nil {
			return "", err
		}
		for _, it := range resp.GetItems() {
			if it.GetCode() != pb.Code_CODE_OK {
				code := codes.FailedPrecondition
				if it.GetCode() == pb.Code_CODE_NOT_FOUND {
					code = codes.NotFound
				}
				return "", status.Errorf(code, "%s is not a dead letter (%s)", f.Get("id"), strings.TrimSpace(stateName(it.GetState())+" "+it.GetDetail()))
			}
		}
		return "Requeued " + f.Get("id") + ": it is pending.", nil
	}},
	{name: "priority", do: func(ctx context.Context, qc pb.QueueClient, f url.Values) (string, error) {
		p, err := strconv.ParseUint(strings.TrimSpace(f.Get("priority")), 10, 32)
		if err != nil || p > 9 {
			return "", errBadPriority
		}
		if _, err := qc.UpdateTask(ctx, &pb.UpdateTaskRequest{TaskId: f.Get("id"), Tenant: f.Get("tenant"), HasPriority: true, Priority: uint32(p)}); err != nil {
			return "", err
		}
		return fmt.Sprintf("Task %s has priority %d now.", f.Get("id"), p), nil
	}},
}

// errBadPriority is a priority field that is not 0..9.
var errBadPriority = errors.New("a priority is a whole number from 0 (claimed last) to 9 (claimed first)")

func changed(did bool, yes, no string) string {
	if did {
		return yes
	}
	return no
}

func count(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatUint(n, 10) + " " + what + "s"
}

func tenantName(t string) string {
	if t == "" {
		return pb.DefaultTenant
	}
	return t
}

func (s *Server) queueAction(a action) func(*view) {
	return func(v *view) { s.act(v, a, "queue "+v.r.PostFormValue("queue")) }
}

func (s *Server) taskAction(a action) func(*view) {
	return func(v *view) { s.act(v, a, "task "+v.r.PostFormValue("id")) }
}

// act runs a after its confirmation, then goes back with a flash.
func (s *Server) act(v *view, a action, what string) {
	f := v.r.PostForm
	if a.confirm != nil && f.Get("confirm") != "yes" {
		fields := url.Values{}
		for k, vs := range f {
			if k != "csrf" && k != "confirm" {
				fields[k] = vs
			}
		}
		s.renderView(v, http.StatusOK, "confirm", map[string]any{"Question": a.confirm(f), "Action": v.r.URL.Path,
			"Fields": fields, "Back": backURL(v.r)})
		return
	}
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	msg, err := a.do(ctx, pb.NewQueueClient(s.conn), f)
	if errors.Is(err, errBadPriority) {
		http.Error(v.w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		s.fail(v, a.name+" "+what, err)
		return
	}
	s.flash(v.w, msg)
	http.Redirect(v.w, v.r, backURL(v.r), http.StatusSeeOther)
}

// flashCookie carries an action's sentence to the page it returns to,
// which shows it once and clears it.
const flashCookie = "docket_flash"

func (s *Server) flash(w http.ResponseWriter, msg string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/", MaxAge: 60,
		HttpOnly: true, Secure: s.cfg.HTTPS, SameSite: http.SameSiteStrictMode})
}

// takeFlash returns the pending flash and clears it; a poll leaves it.
func (s *Server) takeFlash(v *view) string {
	if v.r.Header.Get("X-Docket-Poll") != "" {
		return ""
	}
	c, err := v.r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(v.w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.cfg.HTTPS, SameSite: http.SameSiteStrictMode})
	msg, err := url.QueryUnescape(c.Value)
	if err != nil {
		return ""
	}
	return msg
}
