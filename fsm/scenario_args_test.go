package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// The rule book's arguments, and its directives for queue settings,
// schedules and tokens (scenario_test.go runs them).

// names_ is the bare words of the directive: the tasks it is about.
func (w *scenario) names_(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && a.Key != "dead" && a.Key != "retry-on-timeout" && a.Key != "reset" && a.Key != "catchup" {
			out = append(out, a.Key)
		}
	}
	return out
}

func (w *scenario) name(d *datadriven.TestData) string {
	n := w.names_(d)
	if len(n) == 0 {
		d.Fatalf(w.t, "%s: which one?", d.Cmd)
	}
	return n[0]
}

func (w *scenario) id(name string) string {
	if id, ok := w.ids[name]; ok {
		return id
	}
	return name // an unknown name is sent as an id, which no task has
}

func (w *scenario) fenceOf(d *datadriven.TestData, n string) uint64 {
	if v, ok := w.arg(d, "fence"); ok {
		return uint64(w.uint(v))
	}
	return w.fence[n]
}

func (w *scenario) arg(d *datadriven.TestData, key string) (string, bool) {
	a, ok := d.Arg(key)
	if !ok || len(a.Vals) == 0 {
		return "", false
	}
	return strings.ReplaceAll(a.Vals[0], "_", " "), true
}

func (w *scenario) str(d *datadriven.TestData, key string) string {
	v, _ := w.arg(d, key)
	return v
}

// tenant is the tenant a queue-wide command names: the default one
// unless the script says.
func (w *scenario) tenant(d *datadriven.TestData) string {
	return w.strOr(d, "tenant", pb.DefaultTenant)
}

func (w *scenario) strOr(d *datadriven.TestData, key, def string) string {
	if v, ok := w.arg(d, key); ok {
		return v
	}
	return def
}

func (w *scenario) uint(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		w.t.Fatalf("%q: want a count", v)
	}
	return n
}

func (w *scenario) uintArg(d *datadriven.TestData, key string, def int) int {
	if v, ok := w.arg(d, key); ok {
		return w.uint(v)
	}
	return def
}

func (w *scenario) dur(v string) time.Duration {
	dd, err := time.ParseDuration(v)
	if err != nil {
		w.t.Fatalf("%q: %v", v, err)
	}
	return dd
}

func (w *scenario) durArg(d *datadriven.TestData, key string) time.Duration {
	return w.durOr(d, key, 0)
}

func (w *scenario) durOr(d *datadriven.TestData, key string, def time.Duration) time.Duration {
	if v, ok := w.arg(d, key); ok {
		return w.dur(v)
	}
	return def
}

// retry is the policy of backoff=<base> [cap=] [mult=] [jitter=].
func (w *scenario) retry(d *datadriven.TestData) *pb.RetryPolicy {
	return &pb.RetryPolicy{BaseNs: int64(w.durArg(d, "backoff")), CapNs: int64(w.durArg(d, "cap")),
		Multiplier: uint32(w.uintArg(d, "mult", 0)), JitterPercent: uint32(w.uintArg(d, "jitter", 0))}
}

func (w *scenario) retryPolicy(d *datadriven.TestData) *pb.Command {
	c := &pb.SetQueueRetryCmd{Queue: w.name(d), Tenant: w.tenant(d), Reset_: d.HasArg("reset")}
	if _, ok := d.Arg("backoff"); ok {
		c.HasRetry, c.Retry = true, w.retry(d)
	}
	if v, ok := w.arg(d, "dead-retention"); ok {
		c.HasDeadRetention, c.DeadRetentionNs = true, int64(w.dur(v))
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Now: w.now,
		Body: &pb.Command_SetQueueRetry{SetQueueRetry: c}}
}

// limits is `limits <queue>|tenant [max-running=] [rate=] [burst=]`.
func (w *scenario) limits(d *datadriven.TestData) *pb.Command {
	c := &pb.SetQueueLimitsCmd{Queue: w.name(d), Tenant: w.tenant(d)}
	if c.Queue == "tenant" {
		c.Queue = ""
	}
	if v, ok := w.arg(d, "max-running"); ok {
		c.MaxRunning = proto.Uint32(uint32(w.uint(v)))
	}
	if v, ok := w.arg(d, "rate"); ok {
		c.RateMilli = proto.Uint64(uint64(w.uint(v)))
	}
	if v, ok := w.arg(d, "burst"); ok {
		c.Burst = proto.Uint32(uint32(w.uint(v)))
	}
	w.perKeyLimits(d, c)
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Now: w.now,
		Body: &pb.Command_SetQueueLimits{SetQueueLimits: c}}
}

// schedule is `schedule put|remove|fire|show <name> ...`.
func (w *scenario) schedule(d *datadriven.TestData) []string {
	verb, name := w.verb(d)
	tenant := w.tenant(d)
	switch verb {
	case "put":
		s := &pb.Schedule{Name: name, Tenant: tenant, Queue: w.strOr(d, "q", "q"), Spec: w.str(d, "spec"),
			Zone: w.str(d, "zone"), Payload: []byte(name), Priority: uint32(w.uintArg(d, "prio", 0)),
			CatchupMax: uint32(w.uintArg(d, "catchup", 0)), Key: []byte(w.str(d, "of"))}
		if d.HasArg("catchup") {
			s.Missed = pb.MissedPolicy_MISSED_POLICY_CATCH_UP
		}
		return w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE, Now: w.now,
			Body: &pb.Command_PutSchedule{PutSchedule: &pb.PutScheduleCmd{Schedule: s}}}), []string{name})
	case "remove":
		return w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE, Now: w.now,
			Body: &pb.Command_RemoveSchedule{RemoveSchedule: &pb.RemoveScheduleCmd{Tenant: tenant, Name: name}}}), []string{name})
	case "fire":
		res := w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE, Now: w.now,
			Body: &pb.Command_FireSchedule{FireSchedule: &pb.FireScheduleCmd{Tenant: tenant, Name: name,
				Slot: t0 + int64(w.durArg(d, "slot"))}}})
		if it := res.GetItems(); len(it) == 1 && it[0].GetCode() == pb.Code_CODE_OK && it[0].GetTaskId() != "" {
			if as, ok := w.arg(d, "as"); ok {
				w.ids[as], w.names[it[0].GetTaskId()] = it[0].GetTaskId(), as
			}
		}
		return w.answer(res, []string{name})
	case "show":
		s, err := w.h.f.Schedule(tenant, name)
		if err != nil {
			return []string{err.Error()}
		}
		line := fmt.Sprintf("%s q=%s spec=%q fired=%d", s.GetName(), s.GetQueue(), s.GetSpec(), s.GetFired())
		if s.GetLastSlot() != 0 {
			line += " last-slot@" + w.rel(s.GetLastSlot())
		}
		if id := s.GetLastTaskId(); id != "" {
			line += " last-task=" + w.nameOf(id)
		}
		return []string{line}
	}
	d.Fatalf(w.t, "schedule %s: unknown", verb)
	return nil
}

// verb is a two-word directive's verb and the name it is about.
func (w *scenario) verb(d *datadriven.TestData) (verb, name string) {
	if len(d.CmdArgs) == 0 {
		d.Fatalf(w.t, "%s: which verb?", d.Cmd)
	}
	if len(d.CmdArgs) > 1 {
		name = d.CmdArgs[1].Key
	}
	return d.CmdArgs[0].Key, name
}

// token is `token create|revoke|lookup <accessor> ...`; a token's secret
// is its accessor's name with "-secret".
func (w *scenario) token(d *datadriven.TestData) []string {
	verb, acc := w.verb(d)
	switch verb {
	case "create":
		tok := &pb.Token{Accessor: acc, SecretHash: HashSecret(acc + "-secret"), Name: acc}
		if a, ok := d.Arg("roles"); ok {
			tok.Roles = a.Vals
		}
		if a, ok := d.Arg("tenants"); ok {
			tok.Tenants = a.Vals
		}
		if v, ok := w.arg(d, "expires"); ok {
			tok.ExpiresAt = t0 + int64(w.dur(v))
		}
		return w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, Now: w.now,
			Body: &pb.Command_CreateToken{CreateToken: &pb.CreateTokenCmd{Token: tok}}}), []string{acc})
	case "revoke":
		return w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN, Now: w.now,
			Body: &pb.Command_RevokeToken{RevokeToken: &pb.RevokeTokenCmd{Accessor: acc}}}), []string{acc})
	case "lookup":
		tok, err := w.h.f.TokenByHash(HashSecret(acc + "-secret"))
		if errors.Is(err, pb.ErrNotFound) {
			return []string{"no such token"}
		} else if err != nil {
			w.t.Fatal(err)
		}
		line := fmt.Sprintf("%s roles=%s tenants=%s", tok.GetAccessor(), strings.Join(tok.GetRoles(), ","), strings.Join(tok.GetTenants(), ","))
		if tok.GetExpiresAt() != 0 {
			line += " expires@" + w.rel(tok.GetExpiresAt())
		}
		return []string{line}
	case "list":
		toks, err := w.h.f.Tokens()
		if err != nil {
			w.t.Fatal(err)
		}
		var out []string
		for _, tok := range toks {
			out = append(out, tok.GetAccessor())
		}
		slices.Sort(out)
		return []string{strings.Join(out, " ")}
	}
	d.Fatalf(w.t, "token %s: unknown", verb)
	return nil
}
