package fsm

import (
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Bounds of task dependencies: what one task may wait on, and how many
// children one parent's end visits in its apply.
const (
	// MaxParents bounds the parents of one task (after and after_index
	// together).
	MaxParents = 64
	// MaxChildren bounds the children ever registered on one parent while
	// it was unfinished; a further child is refused RESOURCE_EXHAUSTED.
	MaxChildren = 10000
)

// depsState is a txn's work list of parents that ended: visiting their
// children may end more parents (a cancel cascades), which join the list
// instead of recursing, so a long chain costs no stack.
type depsState struct {
	ended    []endedParent
	draining bool
}

type endedParent struct {
	id  string
	ok  bool   // completed; otherwise failed, dead, cancelled or purged
	why string // the children's last_error when they are cancelled
}

// hasDeps reports whether an Enqueue names parents.
func hasDeps(c *pb.EnqueueCmd) bool {
	for _, nt := range c.GetTasks() {
		if len(nt.GetAfter()) > 0 || len(nt.GetAfterIndex()) > 0 {
			return true
		}
	}
	return false
}

// checkDeps refuses a whole Enqueue whose references are wrong: too many
// parents, an index that is not of an earlier task of the command (which
// is what makes a cycle impossible to write: every edge points back in
// log order), or an id that names no task of the task's tenant. Each is
// INVALID_ARGUMENT naming the field: the request names something that
// cannot be a parent, whether the id is unknown, purged or another
// tenant's (which must read exactly as unknown). It fills res and reports
// true when it refused.
func (tx *txn) checkDeps(c *pb.EnqueueCmd, res *pb.CommandResult) (bool, error) {
	for i, nt := range c.GetTasks() {
		n := len(nt.GetAfter()) + len(nt.GetAfterIndex())
		if n > MaxParents {
			fieldErr("after", "%d parents > %d", n, MaxParents).InList("tasks", i).Fill(res)
			return true, nil
		}
		for _, j := range nt.GetAfterIndex() {
			if int(j) >= i {
				fieldErr("after_index", "task %d is not before task %d: a task waits only on earlier tasks of its Enqueue, so no cycle can be written", j, i).
					InList("tasks", i).Fill(res)
				return true, nil
			}
		}
		if nt.GetOnParentFailure() > pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN {
			fieldErr("on_parent_failure", "unknown policy %d", nt.GetOnParentFailure()).InList("tasks", i).Fill(res)
			return true, nil
		}
		for _, id := range nt.GetAfter() {
			// A name check keeps '/' out of the child index's keys.
			if err := checkName("after", id); err != nil {
				err.(*pb.FieldError).InList("tasks", i).Fill(res)
				return true, nil
			}
			p, ok, err := tx.getTask(id)
			if err != nil {
				return false, err
			}
			if !ok {
				if ok, err = tx.tombOf(id, nt.GetTenant()); err != nil {
					return false, err
				}
			} else if p.GetTenant() != nt.GetTenant() {
				ok = false
			}
			if !ok {
				// Another tenant's task is unknown, exactly as a missing
				// one, so that an id tells a caller nothing; a purged
				// parent is missing too. Answers are not stored, so the
				// wording changes no keyspace.
				fieldErr("after", "no task %s of this tenant: a parent is a task of the same tenant, "+
					"unfinished or finished within its retention", id).InList("tasks", i).Fill(res)
				return true, nil
			}
		}
	}
	return false, nil
}

// parentsOf lists a new task's parents without repeats: its after ids,
// then the ids its after_index names. ids holds the id stored (or found
// by idempotency key) at each earlier position, "" where the task was
// refused; a reference to a refused task returns its position as refused,
// which is -1 otherwise.
func parentsOf(nt *pb.NewTask, ids []string) (parents []string, refused int) {
	seen := make(map[string]bool, len(nt.GetAfter())+len(nt.GetAfterIndex()))
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			parents = append(parents, id)
		}
	}
	for _, id := range nt.GetAfter() {
		add(id)
	}
	for _, j := range nt.GetAfterIndex() {
		if ids[j] == "" {
			return nil, int(j)
		}
		add(ids[j])
	}
	return parents, -1
}

// refusedParent is the answer of a task whose parent at position j of the
// same Enqueue was refused: the parent's own code (RESOURCE_EXHAUSTED for
// a tenant limit, so a caller retries the whole graph later), as no child
// is stored without its parents. items are the command's answers so far,
// one per position.
func refusedParent(items []*pb.ItemResult, j int) *pb.ItemResult {
	code := pb.Code_CODE_INVALID_ARGUMENT
	if j < len(items) {
		code = items[j].GetCode()
	}
	return &pb.ItemResult{Code: code, Detail: fmt.Sprintf("its parent tasks[%d] was refused", j)}
}

// waitOn decides a new task's start from its parents' states: t is built
// pending or delayed, and becomes WAITING on the unfinished parents, or
// CANCELLED when a parent already failed and its policy is CANCEL. It
// returns the unfinished parents to register once t is stored, or a
// refusal for the item.
func (tx *txn) waitOn(t *pb.Task, nt *pb.NewTask, parents []string) (unfinished []*pb.Task, refuse *pb.ItemResult, err error) {
	t.Parents = parents
	t.OnParentFailure = nt.GetOnParentFailure()
	failed := ""
	for _, id := range parents {
		p, ok, err := tx.getTask(id)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			// Purged: completed if its tombstone says so (checkDeps
			// refused any other missing parent named by id).
			if done, err := tx.tombOf(id, t.GetTenant()); err != nil || done {
				if err != nil {
					return nil, nil, err
				}
				continue
			}
		}
		if !ok || p.GetTenant() != t.GetTenant() {
			// checkDeps refused these; the same rule, should one slip by.
			return nil, &pb.ItemResult{Code: pb.Code_CODE_INVALID_ARGUMENT, TaskId: id, Detail: "parent not stored"}, nil
		}
		switch p.GetState() {
		case pb.TaskState_TASK_STATE_COMPLETED:
		case pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_DEAD, pb.TaskState_TASK_STATE_CANCELLED:
			if failed == "" {
				failed = fmt.Sprintf("parent %s ended %s", id, stateWord(p.GetState()))
			}
		default:
			if p.GetChildren() >= MaxChildren {
				return nil, &pb.ItemResult{Code: pb.Code_CODE_RESOURCE_EXHAUSTED, TaskId: id,
					Detail: fmt.Sprintf("parent %s has %d children, the most one task may have", id, MaxChildren)}, nil
			}
			unfinished = append(unfinished, p)
		}
	}
	if failed != "" && t.GetOnParentFailure() != pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN {
		t.State = pb.TaskState_TASK_STATE_CANCELLED
		tx.cancelledOutcome(t, t.GetState())
		t.LastError = failed
		t.FinishedAt = tx.now
		t.ExpireAt = addTime(tx.now, t.GetRetentionNs())
		return nil, nil, nil
	}
	if len(unfinished) > 0 {
		t.State = pb.TaskState_TASK_STATE_WAITING
		t.Waiting = uint32(len(unfinished))
	}
	return unfinished, nil, nil
}

// register writes the child index of a stored waiting task on each of its
// unfinished parents and counts the child on the parent, so the parent's
// end knows to look.
func (tx *txn) register(t *pb.Task, unfinished []*pb.Task) error {
	for _, p := range unfinished {
		if err := storage.SetIndex(&tx.b, storage.ChildKey(p.GetId(), t.GetId())); err != nil {
			return fmt.Errorf("child index %s: %w", t.GetId(), err)
		}
		// Re-read: an earlier parent of the list may be this one's own
		// parent, and the record read in waitOn may be stale by now.
		cur, ok, err := tx.getTask(p.GetId())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("parent %s of %s vanished", p.GetId(), t.GetId())
		}
		if err := tx.move(cur, cur.GetState(), func(p *pb.Task) { p.Children++ }); err != nil {
			return err
		}
	}
	return nil
}

// depsMoved keeps dependencies in step with a task's move (txn.write): the
// queue's waiting count, the child index of a waiting task that ended
// another way (cancel, cascade), and the visit of the children of a task
// that ended. It does nothing for a task that neither waits nor has
// children, so before LevelDependencies it writes nothing.
func (tx *txn) depsMoved(t *pb.Task, from pb.TaskState) error {
	to := t.GetState()
	if to == from {
		return nil
	}
	waiting := pb.TaskState_TASK_STATE_WAITING
	if from == waiting || to == waiting {
		if err := tx.countWaiting(t.GetQueue(), t.GetTenant(), to == waiting); err != nil {
			return err
		}
	}
	if !terminal(to) {
		return nil
	}
	if from == waiting {
		if err := tx.dropChildKeys(t); err != nil {
			return err
		}
	}
	if t.GetChildren() == 0 {
		return nil
	}
	ok := to == pb.TaskState_TASK_STATE_COMPLETED
	return tx.parentEnded(endedParent{id: t.GetId(), ok: ok, why: fmt.Sprintf("parent %s ended %s", t.GetId(), stateWord(to))})
}

// depsRemoved is depsMoved for a task deleted for good (txn.remove). A
// task purged before it ended never ran: its children see a failure.
func (tx *txn) depsRemoved(t *pb.Task) error {
	if t.GetState() == pb.TaskState_TASK_STATE_WAITING {
		if err := tx.countWaiting(t.GetQueue(), t.GetTenant(), false); err != nil {
			return err
		}
		if err := tx.dropChildKeys(t); err != nil {
			return err
		}
	}
	if t.GetState() == pb.TaskState_TASK_STATE_COMPLETED && tx.feature >= LevelDependencies {
		// Retention purged a completed task: a task enqueued after it
		// later still finds it completed, for one more retention.
		if err := storage.PutTomb(&tx.b, t.GetId(), t.GetTenant(), addTime(tx.now, t.GetRetentionNs())); err != nil {
			return err
		}
	}
	if terminal(t.GetState()) || t.GetChildren() == 0 {
		return nil // an ended task visited its children when it ended
	}
	return tx.parentEnded(endedParent{id: t.GetId(), why: fmt.Sprintf("parent %s was purged", t.GetId())})
}

// parentEnded visits the children of ended parents, in the order the
// parents ended and each parent's children in id order: a completed
// parent (or a failed one, for a child of policy RUN) counts down the
// child's waiting, and the last one releases it; a failed parent cancels
// a child of policy CANCEL, whose own end joins the list. A released child
// becomes delayed at its visible time, at once due when that passed: a
// pending seq here could repeat one the entry's own command gives, and a
// claim promotes due delayed tasks itself.
func (tx *txn) parentEnded(e endedParent) error {
	tx.deps.ended = append(tx.deps.ended, e)
	if tx.deps.draining {
		return nil
	}
	tx.deps.draining = true
	defer func() { tx.deps.draining = false }()
	for len(tx.deps.ended) > 0 {
		e := tx.deps.ended[0]
		tx.deps.ended = tx.deps.ended[1:]
		kids, err := storage.Children(tx.r, e.id, 0)
		if err != nil {
			return err
		}
		for _, id := range kids {
			if err := tx.b.Delete(storage.ChildKey(e.id, id), nil); err != nil {
				return fmt.Errorf("child index %s: %w", id, err)
			}
			c, ok, err := tx.getTask(id)
			if err != nil {
				return err
			}
			if !ok || c.GetState() != pb.TaskState_TASK_STATE_WAITING {
				return fmt.Errorf("child index of %s points at %s in state %v", e.id, id, c.GetState())
			}
			if !e.ok && c.GetOnParentFailure() != pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN {
				err = tx.finishTask(c, pb.TaskState_TASK_STATE_CANCELLED, func(c *pb.Task) { c.LastError = e.why })
			} else {
				err = tx.countDown(c)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// tombOf reports whether id is a purged task of tenant that completed:
// another tenant's tombstone is none, as its task would be.
func (tx *txn) tombOf(id, tenant string) (bool, error) {
	tn, ok, err := storage.GetTomb(tx.r, id)
	return ok && tn == tenant, err
}

// purgeTombs deletes up to limit tombstones whose time ended. Retention's
// Purge runs it, so the leader proposes Purge for tombstones too (HasDue).
func (tx *txn) purgeTombs(limit int) error {
	if tx.feature < LevelDependencies {
		return nil
	}
	entries, err := storage.ExpiredTombs(tx.r, tx.now, limit)
	if err != nil {
		return fmt.Errorf("expired tombstones: %w", err)
	}
	for _, e := range entries {
		if err := storage.DeleteTomb(&tx.b, e); err != nil {
			return err
		}
	}
	return nil
}

// countDown counts one parent of a waiting child as done, and releases
// the child when it was the last.
func (tx *txn) countDown(c *pb.Task) error {
	if c.GetWaiting() > 1 {
		return tx.move(c, pb.TaskState_TASK_STATE_WAITING, func(c *pb.Task) { c.Waiting-- })
	}
	return tx.move(c, pb.TaskState_TASK_STATE_DELAYED, func(c *pb.Task) {
		c.Waiting = 0
		c.VisibleAt = max(c.GetVisibleAt(), tx.now)
	})
}

// dropChildKeys deletes a waiting task's child index under each of its
// parents: it ended without them. A key a parent already dropped is
// deleted again, which changes nothing.
func (tx *txn) dropChildKeys(t *pb.Task) error {
	for _, p := range t.GetParents() {
		if err := tx.b.Delete(storage.ChildKey(p, t.GetId()), nil); err != nil {
			return fmt.Errorf("child index %s: %w", t.GetId(), err)
		}
	}
	return nil
}

// countWaiting adds one to (or takes one from) a queue's waiting count.
func (tx *txn) countWaiting(queue, tenant string, up bool) error {
	n, err := storage.GetWaitingCount(tx.r, queue, tenant)
	if err != nil {
		return err
	}
	switch {
	case up:
		n++
	case n > 0:
		n--
	}
	return storage.PutWaitingCount(&tx.b, queue, tenant, n)
}

// terminal reports whether a task in state s has ended for its children:
// DEAD counts, though RequeueDead may replay it; its children followed
// their policy when it died.
func terminal(s pb.TaskState) bool {
	switch s {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED,
		pb.TaskState_TASK_STATE_DEAD, pb.TaskState_TASK_STATE_CANCELLED:
		return true
	}
	return false
}

// stateWord is a state's short name for messages: "FAILED".
func stateWord(s pb.TaskState) string {
	const prefix = len("TASK_STATE_")
	if w := s.String(); len(w) > prefix {
		return w[prefix:]
	}
	return s.String()
}
