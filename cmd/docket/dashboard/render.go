package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// pageNames are the templates under templates/, each parsed with the
// layout.
var pageNames = []string{"login", "error", "cluster", "queues", "queue", "task", "dead", "leases", "confirm"}

var funcs = template.FuncMap{
	"state": func(s pb.TaskState) string {
		return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATE_"))
	},
	"outcome": func(o pb.Outcome) string {
		return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
	},
	"attemptOutcome": func(o pb.AttemptOutcome) string {
		if o == pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED {
			return "running"
		}
		return strings.ToLower(strings.TrimPrefix(o.String(), "ATTEMPT_OUTCOME_"))
	},
	// completedBy is the claim number of the attempt that completed t; 0
	// when none did (or its record is gone).
	"completedBy": func(t *pb.Task) uint32 {
		for _, a := range t.GetHistory() {
			if a.GetOutcome() == pb.AttemptOutcome_ATTEMPT_OUTCOME_COMPLETED {
				return a.GetClaim()
			}
		}
		return 0
	},
	"int":         func(v uint32) int { return int(v) },
	"dur":         func(ns int64) string { return human(time.Duration(ns)) },
	"attemptText": attemptText,
	"lastWorker":  lastWorker,
	"short":       func(b []byte) string { return cut(preview(b), 80) },
	"limits":      limits,
	"backoff":     backoff,
	"stateName":   stateName,
	// dict passes several values to a shared template: dict "K" v ...
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: odd arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"ts":      stamp,
	"ago":     ago,
	"until":   until,
	"preview": preview,
	"unixms":  func(ns int64) int64 { return ns / int64(time.Millisecond) },
	// renewed is a running task's last claim or heartbeat: each sets
	// lease_until = now + lease.
	"renewed": func(t *pb.Task) int64 { return t.GetLeaseUntil() - t.GetLeaseNs() },
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

// render writes page with data into a buffer first, so a template error
// is a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, code int, page string, data map[string]any) {
	s.renderCSRF(w, code, page, "", data)
}

func (s *Server) renderView(v *view, code int, page string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Flash"] = s.takeFlash(v)
	s.renderCSRF(v.w, code, page, v.csrf, data)
}

func (s *Server) renderCSRF(w http.ResponseWriter, code int, page, csrf string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Page"], data["Auth"], data["CSRF"], data["Now"] = page, s.cfg.Auth, csrf, time.Now()
	var buf bytes.Buffer
	if err := s.pages[page].Execute(&buf, data); err != nil {
		s.log.Error("dashboard template", "page", page, "err", err)
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes()) // a viewer that left is no error of ours
}

// stamp is a leader-stamped Unix-ns time as UTC, "-" when unset.
func stamp(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000Z")
}

// ago is how long before now ns was, rounded for reading.
func ago(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return human(time.Since(time.Unix(0, ns)))
}

// until is how long from now to ns; negative when past.
func until(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return human(time.Until(time.Unix(0, ns)))
}

// human is a duration for reading: 19m34s, 4.2s, 120ms, 3d4h.
func human(d time.Duration) string {
	if d >= 48*time.Hour || d <= -48*time.Hour {
		days := d / (24 * time.Hour)
		return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour).Abs()/time.Hour)
	}
	return roundDur(d).String()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d > time.Minute || d < -time.Minute:
		return d.Round(time.Second)
	case d > time.Second || d < -time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// previewBytes is how much of a payload or result a page shows.
const previewBytes = 512

// preview shows bytes as text when they are UTF-8, as hex otherwise, cut
// at previewBytes.
func preview(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	cut, more := b, ""
	if len(cut) > previewBytes {
		cut, more = cut[:previewBytes], fmt.Sprintf(" … (%d bytes)", len(b))
	}
	if utf8.Valid(cut) {
		return string(cut) + more
	}
	return fmt.Sprintf("hex %x%s", cut, more)
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// attemptText says where a task stands with its attempts, in words that
// fit its state: attempt 1 of 5 while the first runs, nothing about
// attempts left on a task that finished.
func attemptText(t *pb.Task) string {
	a, m := t.GetAttempts(), t.GetMaxAttempts()
	switch t.GetState() {
	case pb.TaskState_TASK_STATE_RUNNING:
		return fmt.Sprintf("attempt %d of %d", a+1, m)
	case pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED, pb.TaskState_TASK_STATE_WAITING:
		if a == 0 {
			return fmt.Sprintf("not run yet; up to %d attempts", m)
		}
		return fmt.Sprintf("%d failed; next is attempt %d of %d", a, a+1, m)
	case pb.TaskState_TASK_STATE_DEAD:
		return fmt.Sprintf("%d of %d attempts failed", a, m)
	}
	claims := t.GetClaims()
	out := fmt.Sprintf("finished after %d claim%s", claims, plural(uint64(claims)))
	if a > 0 {
		out += fmt.Sprintf(", %d of them failed", a)
	}
	return out
}

func plural(n uint64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// lastWorker is the worker of a task's last claim: its newest recorded
// attempt's, else the record's, else "-".
func lastWorker(t *pb.Task) string {
	if h := t.GetHistory(); len(h) > 0 && h[len(h)-1].GetWorkerId() != "" {
		return h[len(h)-1].GetWorkerId()
	}
	if t.GetWorkerId() != "" {
		return t.GetWorkerId()
	}
	return "-"
}

// limits is a queue's limits in words, "-" when it has none.
func limits(q *pb.QueueStats) string {
	var parts []string
	if q.GetMaxRunning() > 0 {
		parts = append(parts, fmt.Sprintf("%d running", q.GetMaxRunning()))
	}
	if q.GetRateMilli() > 0 {
		r := fmt.Sprintf("%g/s", float64(q.GetRateMilli())/1000)
		if q.GetBurst() > 0 {
			r += fmt.Sprintf(" (burst %d)", q.GetBurst())
		}
		parts = append(parts, r)
	}
	if q.GetTenantMaxRunning() > 0 {
		parts = append(parts, fmt.Sprintf("tenant %d/%d running", q.GetTenantRunning(), q.GetTenantMaxRunning()))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// cut shortens s to n runes for a table cell.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// backoff is a retry policy in words: "5s, doubling, up to 10m0s, less up
// to 20% jitter"; "" when it has none.
func backoff(p *pb.RetryPolicy) string {
	if p.GetBaseNs() == 0 {
		return ""
	}
	out := human(time.Duration(p.GetBaseNs()))
	switch m := p.GetMultiplier(); {
	case m == 2:
		out += ", doubling"
	case m > 2:
		out += fmt.Sprintf(", times %d", m)
	default:
		out += " each time"
	}
	if p.GetCapNs() > 0 {
		out += ", up to " + human(time.Duration(p.GetCapNs()))
	}
	if p.GetJitterPercent() > 0 {
		out += fmt.Sprintf(", less up to %d%% jitter", p.GetJitterPercent())
	}
	return out
}
