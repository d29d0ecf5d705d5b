package main

import (
	"context"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"strings"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// token manages bearer tokens: create prints the secret once; list shows
// accessors, names, roles, tenants and expiry, never a secret or a hash;
// revoke deletes by accessor. Each needs an admin token over "*".
func (v *verb) token(ctx context.Context, args []string) error {
	name := v.fs.String("name", "", "token name, for people")
	roles := v.fs.String("roles", "", "create: comma-separated roles the token grants: producer (enqueue, wait, task, task update, schedules), "+
		"worker (claim, heartbeat, submit, nack, snooze), reader (stats, task, tasks, schedule list), admin (stats, tasks, "+
		"dead letters, cancel, queue control, tokens, cluster); give several for their union, e.g. producer,reader")
	tenants := v.fs.String("tenants", "", "create: comma-separated tenants the roles hold over, e.g. acme,globex; '*' for every tenant "+
		"(an admin over '*' may manage tokens and the cluster). A call for a tenant not listed answers PermissionDenied, and another tenant's task answers NotFound")
	ttl := v.fs.Duration("ttl", 0, "the token expires after this long (0: never)")
	const what = "create --roles R --tenants T [--name N] [--ttl D] | token list | token revoke ACCESSOR"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub, pos := pos[0], pos[1:]
	switch {
	case sub == "create" && len(pos) == 0, sub == "list" && len(pos) == 0, sub == "revoke" && len(pos) == 1:
	default:
		return fmt.Errorf("%w: docket token %s", errUsage, what)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		switch sub {
		case "create":
			resp, err := c.CreateToken(ctx, &pb.CreateTokenRequest{Name: *name, Roles: splitList(*roles), Tenants: splitList(*tenants), TtlNs: int64(*ttl)})
			if err != nil {
				return err
			}
			return v.print(func(w io.Writer) {
				fmt.Fprintf(w, "accessor: %s\nsecret:   %s\n", resp.GetAccessor(), resp.GetSecret())
				if resp.GetExpiresAt() != 0 {
					fmt.Fprintf(w, "expires:  %s\n", time.Unix(0, resp.GetExpiresAt()).UTC().Format(time.RFC3339))
				}
				fmt.Fprintln(w, "The secret is shown only now; the cluster keeps its hash.")
			}, resp)
		case "revoke":
			if err := c.RevokeToken(ctx, pos[0]); err != nil {
				return notFound(err, "token with accessor", pos[0], "docket token list shows the accessors")
			}
			return v.print(func(w io.Writer) { fmt.Fprintf(w, "revoked %s\n", pos[0]) }, &pb.RevokeTokenResponse{})
		}
		toks, err := c.ListTokens(ctx)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "%-24s %-16s %-28s %-20s %s\n", "ACCESSOR", "NAME", "ROLES", "TENANTS", "EXPIRES")
			for _, t := range toks {
				exp := "never"
				if t.GetExpiresAt() != 0 {
					exp = time.Unix(0, t.GetExpiresAt()).UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%-24s %-16s %-28s %-20s %s\n", t.GetAccessor(), cell(t.GetName(), 16),
					strings.Join(t.GetRoles(), ","), strings.Join(t.GetTenants(), ","), exp)
			}
		}, &pb.ListTokensResponse{Tokens: toks})
	})
}
