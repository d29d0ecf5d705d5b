package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Task dependencies. A task enqueued with TaskAfter (or NewTask.After and
// AfterIndex in Enqueue) waits, TASK_STATE_WAITING, until every parent
// completed; one Enqueue whose tasks name earlier ones by AfterIndex sends
// a whole graph as one atomic command. They need a cluster whose every
// server runs a build with feature level 11 (ErrFeatureDisabled); an
// unknown parent (or another tenant's) is ErrInvalidArgument naming
// tasks[i].after, as a forward reference is.

var opParentResults = op{name: "ParentResults", repeatable: true}

// ErrNoParents means ParentResults was asked about a task without parents.
var ErrNoParents = errors.New("task has no parents")

// ParentResults reads the parents of task taskID of the client's tenant:
// each one's state, outcome and result, in the task's order of parents.
// A parent purged since reads as state UNSPECIFIED with no result. It
// needs the worker, producer or reader role over the tenant.
func (c *Client) ParentResults(ctx context.Context, taskID string) ([]*docketv1.ParentResult, error) {
	return c.parentResults(ctx, taskID, c.cfg.tenant)
}

func (c *Client) parentResults(ctx context.Context, taskID, tenant string) ([]*docketv1.ParentResult, error) {
	req := &docketv1.ParentResultsRequest{TaskId: taskID, Tenant: tenant}
	var parents []*docketv1.ParentResult
	_, err := c.invoke(ctx, opParentResults, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ParentResults(ctx, req, opts...)
		parents = r.GetParents()
		return err
	})
	if err != nil {
		return nil, err
	}
	return parents, nil
}

// Parents returns the ids of the tasks this one waited on.
func (t *Task) Parents() []string { return t.p.GetParents() }

// ParentResults reads this task's parents' results (Client.ParentResults)
// with the worker's client, under the task's own tenant. ErrNoParents when
// the task has none.
func (t *Task) ParentResults(ctx context.Context) ([]*docketv1.ParentResult, error) {
	if len(t.p.GetParents()) == 0 {
		return nil, fmt.Errorf("ParentResults %s: %w", t.ID(), ErrNoParents)
	}
	if t.c == nil {
		return nil, fmt.Errorf("ParentResults %s: task was not claimed by a Worker", t.ID())
	}
	return t.c.parentResults(ctx, t.ID(), t.p.GetTenant())
}

// hasDeps reports whether tasks name parents. Such an Enqueue is sent on
// its own, never shared with other callers' (WithSharedRPCs): after_index
// counts positions within the request, and the server refuses the whole
// request for one unknown parent.
func hasDeps(tasks []*docketv1.NewTask) bool {
	for _, t := range tasks {
		if len(t.GetAfter()) > 0 || len(t.GetAfterIndex()) > 0 {
			return true
		}
	}
	return false
}

// ParentInfo is one parent of a task as the task may see it, in Go types:
// never its payload or fence. A parent purged since the child's enqueue
// has State StateUnknown and no Result.
type ParentInfo struct {
	ID        string
	State     State
	Outcome   Outcome
	Result    []byte
	LastError string
}

// parentInfos converts the wire's parents.
func parentInfos(ps []*docketv1.ParentResult) []ParentInfo {
	out := make([]ParentInfo, len(ps))
	for i, p := range ps {
		out[i] = ParentInfo{
			ID: p.GetTaskId(), State: StateOf(p.GetState()), Outcome: OutcomeOf(p.GetOutcome()),
			Result: p.GetResult(), LastError: p.GetLastError(),
		}
	}
	return out
}

// GetParents reads the parents of task taskID of the client's tenant, as
// ParentResults does, in Go types: each one's state, outcome and result,
// in the task's order of parents.
func (c *Client) GetParents(ctx context.Context, taskID string) ([]ParentInfo, error) {
	ps, err := c.ParentResults(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return parentInfos(ps), nil
}

// GetParents reads this task's parents (Client.GetParents) with the
// worker's client, under the task's own tenant, as ParentResults does.
// ErrNoParents when the task has none; Parents lists their ids without a
// call.
func (t *Task) GetParents(ctx context.Context) ([]ParentInfo, error) {
	ps, err := t.ParentResults(ctx)
	if err != nil {
		return nil, err
	}
	return parentInfos(ps), nil
}
