package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// dlq is `docket dlq list|requeue|purge`: a queue's dead letters.
func (v *verb) dlq(ctx context.Context, args []string) error {
	limit := v.fs.Uint("limit", pb.DefaultListLimit, "at most this many tasks")
	id := v.fs.String("id", "", "requeue one task by id")
	cursor := v.fs.String("cursor", "", "continue a list after this cursor")
	const what = "list [QUEUE] | dlq requeue QUEUE | dlq requeue --id ID | dlq purge QUEUE"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub, pos := pos[0], pos[1:]
	if sub == "purge" && len(pos) == 1 {
		return v.purge(ctx, pos[0], true)
	}
	if (sub != "list" && sub != "requeue") || (len(pos) == 0 && sub == "requeue" && *id == "") {
		return fmt.Errorf("%w: docket dlq %s", errUsage, what)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		if sub == "list" {
			queue := "" // every queue of the tenant
			if len(pos) > 0 {
				queue = pos[0]
			}
			res, err := c.ListDead(ctx, &pb.ListDeadRequest{Queue: queue, Tenant: v.c.tenant, Cursor: *cursor, Limit: uint32(*limit)})
			if err != nil {
				return err
			}
			return v.print(func(w io.Writer) {
				fmt.Fprintf(w, "%-20s %-16s %8s %-32s %s\n", "ID", "QUEUE", "ATTEMPTS", "ERROR", "PAYLOAD")
				for _, t := range res.GetTasks() {
					fmt.Fprintf(w, "%-20s %-16s %8s %-32s %s\n", t.GetId(), t.GetQueue(), fmt.Sprintf("%d/%d", t.GetAttempts(), t.GetMaxAttempts()),
						cell(t.GetLastError(), 32), cell(string(t.GetPayload()), payloadWidth))
				}
				if res.GetNextCursor() != "" {
					fmt.Fprintf(w, "more: --cursor %q\n", res.GetNextCursor())
				}
			}, res)
		}
		req := &pb.RequeueDeadRequest{TaskId: *id, Limit: uint32(*limit)}
		if *id == "" {
			req.Queue, req.Tenant = pos[0], v.c.tenant
		}
		items, err := c.RequeueDead(ctx, req)
		if err != nil {
			return err
		}
		if *id != "" && len(items) == 1 {
			// One task asked for: its item's code is the answer.
			if err := client.ItemError(items[0]); err != nil {
				return noTask(err, *id)
			}
		}
		return v.print(func(w io.Writer) {
			for _, it := range items {
				fmt.Fprintf(w, "%s %s\n", it.GetTaskId(), strings.TrimPrefix(it.GetCode().String(), "CODE_"))
			}
		}, &pb.RequeueDeadResponse{Items: items})
	})
}
