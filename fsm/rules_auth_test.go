package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func createTokenCmd(now int64, acc, secret string, exp int64, bootstrap bool) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, Now: now,
		Body: &pb.Command_CreateToken{CreateToken: &pb.CreateTokenCmd{Token: &pb.Token{
			Accessor: acc, SecretHash: HashSecret(secret), Name: "n",
			Roles: []string{pb.RoleProducer}, Tenants: []string{"a"}, ExpiresAt: exp, Bootstrap: bootstrap,
		}}}}
}

func revokeTokenCmd(now int64, acc string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN, Now: now,
		Body: &pb.Command_RevokeToken{RevokeToken: &pb.RevokeTokenCmd{Accessor: acc}}}
}

// Test_TokenLifecycle: create stores the hash (never the secret), a
// duplicate accessor or secret is refused, revoke deletes at its index,
// and the bootstrap token is created once in a cluster's life.
func Test_TokenLifecycle(t *testing.T) {
	h := newHarness(t)
	h.one(createTokenCmd(at(0), "acc1", "s3cret", 0, false), pb.Code_CODE_OK)
	tok, err := h.f.TokenByHash(HashSecret("s3cret"))
	if err != nil || tok.GetAccessor() != "acc1" || tok.GetCreatedAt() != at(0) {
		t.Fatalf("token by hash: %v %v", tok, err)
	}
	h.one(createTokenCmd(at(1), "acc1", "other", 0, false), pb.Code_CODE_DUPLICATE)
	h.one(createTokenCmd(at(1), "acc2", "s3cret", 0, false), pb.Code_CODE_DUPLICATE)
	h.one(revokeTokenCmd(at(2), "acc1"), pb.Code_CODE_OK)
	if _, err := h.f.TokenByHash(HashSecret("s3cret")); err == nil {
		t.Fatal("revoked token still found")
	}
	h.one(revokeTokenCmd(at(3), "acc1"), pb.Code_CODE_NOT_FOUND)

	h.one(createTokenCmd(at(4), "boot", "b1", 0, true), pb.Code_CODE_OK)
	h.one(revokeTokenCmd(at(5), "boot"), pb.Code_CODE_OK)
	h.one(createTokenCmd(at(6), "boot2", "b2", 0, true), pb.Code_CODE_ALREADY_DONE)
	if done, err := h.f.Bootstrapped(); err != nil || !done {
		t.Fatalf("bootstrapped = %v, %v", done, err)
	}
	toks, err := h.f.Tokens()
	if err != nil || len(toks) != 0 {
		t.Fatalf("tokens after revokes: %v %v", toks, err)
	}
}

// Test_TokenValidate: bad shapes and a token born expired are refused as
// a whole, judged at the command's time.
func Test_TokenValidate(t *testing.T) {
	good := func() *pb.Command { return createTokenCmd(at(time.Minute), "acc", "s", 0, false) }
	cases := map[string]struct {
		mut   func(*pb.Token)
		field string
	}{
		"no accessor":    {func(tk *pb.Token) { tk.Accessor = "" }, "accessor"},
		"slash":          {func(tk *pb.Token) { tk.Accessor = "a/b" }, "accessor"},
		"short hash":     {func(tk *pb.Token) { tk.SecretHash = []byte("x") }, "secret_hash"},
		"no roles":       {func(tk *pb.Token) { tk.Roles = nil }, "roles"},
		"unknown role":   {func(tk *pb.Token) { tk.Roles = []string{"root"} }, "roles[0]"},
		"no tenants":     {func(tk *pb.Token) { tk.Tenants = nil }, "tenants"},
		"bad tenant":     {func(tk *pb.Token) { tk.Tenants = []string{"a", "x/y"} }, "tenants[1]"},
		"born expired":   {func(tk *pb.Token) { tk.ExpiresAt = at(time.Minute) }, "expires_at"},
		"expiry in past": {func(tk *pb.Token) { tk.ExpiresAt = at(0) }, "expires_at"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cmd := good()
			c.mut(cmd.GetCreateToken().GetToken())
			res := h.apply(cmd)
			if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
				t.Fatalf("got %v on %q, want INVALID_ARGUMENT on %q", res.GetErrorCode(), res.GetErrorField(), c.field)
			}
			if toks, _ := h.f.Tokens(); len(toks) != 0 {
				t.Fatalf("stored %v", toks)
			}
		})
	}
	h := newHarness(t)
	cmd := good()
	cmd.GetCreateToken().GetToken().Tenants = []string{pb.AllTenants}
	cmd.GetCreateToken().GetToken().ExpiresAt = at(time.Hour)
	h.one(cmd, pb.Code_CODE_OK)
}

// Test_TenantRecheck: a Submit, Heartbeat, Nack or Cancel naming another
// tenant answers NOT_FOUND with no state and no fence, exactly as for a
// missing task, and changes nothing; naming the right tenant works.
func Test_TenantRecheck(t *testing.T) {
	h := newHarness(t)
	ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
	run := h.claimOne(at(1), "q", "a")
	pending := ids[1]
	if run.GetId() == pending {
		pending = ids[0]
	}
	before := mustHash(t, h.f)
	sub := submitCmd(at(2), run.GetId(), run.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "forged")
	sub.GetSubmit().Tenant = "b"
	nack := nackCmd(at(2), run.GetId(), run.GetFence(), 0, "x")
	nack.GetNack().Tenant = "b"
	hb := heartbeatCmd(at(2), &pb.HeartbeatItem{TaskId: run.GetId(), Fence: run.GetFence(), Tenant: "b"})
	cancel := cancelCmd(at(2), pending)
	cancel.GetCancel().Tenant = "b"
	for _, cmd := range []*pb.Command{sub, nack, hb, cancel} {
		it := h.one(cmd, pb.Code_CODE_NOT_FOUND)
		if it.GetFence() != 0 || it.GetState() != pb.TaskState_TASK_STATE_UNSPECIFIED || it.GetDetail() != "no such task" && cmd != cancel {
			t.Fatalf("%v leaks: %v", cmd.GetType(), it)
		}
	}
	_ = before // applied index and now moved; compare the tasks instead
	if got := h.task(run.GetId()); got.GetState() != pb.TaskState_TASK_STATE_RUNNING || len(got.GetResult()) != 0 {
		t.Fatalf("running task changed: %v", got)
	}
	if got := h.task(pending); got.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("pending task changed: %v", got)
	}
	ok := submitCmd(at(3), run.GetId(), run.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "mine")
	ok.GetSubmit().Tenant = "a"
	h.one(ok, pb.Code_CODE_OK)
}
