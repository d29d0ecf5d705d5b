package fsm

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// addDeps makes tasks a small DAG of one tenant: some wait on earlier
// tasks of the command, some on tasks minted before (running, finished,
// purged or unknown ones too, which are refused INVALID_ARGUMENT), with either
// failure policy. Below LevelDependencies apply ignores it all.
func (w *workload) addDeps(tasks []*pb.NewTask) {
	tn := tasks[0].GetTenant()
	for i, nt := range tasks {
		nt.Tenant = tn
		if i > 0 && w.pct(60) {
			nt.AfterIndex = append(nt.AfterIndex, uint32(w.rng.IntN(i)))
			if i > 1 && w.pct(30) {
				nt.AfterIndex = append(nt.AfterIndex, uint32(w.rng.IntN(i)))
			}
		}
		if len(w.ids) > 0 && w.pct(15) {
			nt.After = append(nt.After, w.ids[len(w.ids)-1-w.rng.IntN(min(len(w.ids), 10))])
		}
		if w.pct(30) {
			nt.OnParentFailure = pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN
		}
		if w.pct(2) {
			nt.AfterIndex = append(nt.AfterIndex, uint32(i)) // refused: a self reference
		}
	}
}

// checkDepsKeyspace asserts the dependency invariants over a full read of
// the keyspace: each child index key j/c/<parent>/<child> names a waiting
// child that lists the parent and a parent that has not ended; each
// waiting task has exactly as many such keys as it waits on, and at least
// one; each queue's waiting count equals a recount and 0 has no key.
func checkDepsKeyspace(ks *keyspace, fail func(string, ...any)) {
	keysOf := map[string]int{}
	counts := map[string]uint64{}
	for k, v := range ks.deps {
		switch {
		case strings.HasPrefix(k, "j/c/"):
			parent, child, ok := strings.Cut(k[len("j/c/"):], "/")
			c, p := ks.tasks[child], ks.tasks[parent]
			switch {
			case !ok || len(v) != 0:
				fail("child index %q: malformed", k)
			case c == nil || c.GetState() != pb.TaskState_TASK_STATE_WAITING || !slices.Contains(c.GetParents(), parent):
				fail("child index %q: child %v", k, c)
			case p == nil || terminal(p.GetState()) || p.GetChildren() == 0:
				fail("child index %q: parent %v", k, p)
			}
			keysOf[child]++
		case strings.HasPrefix(k, "j/n/"):
			if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
				fail("waiting count %q: %x", k, v)
			} else {
				counts[k] = binary.BigEndian.Uint64(v)
			}
		case strings.HasPrefix(k, "j/t/"):
			id := k[len("j/t/"):]
			if ks.tasks[id] != nil || len(v) < 8 {
				fail("tombstone %q of a live task, or %x malformed", k, v)
			} else if _, ok := ks.deps[string(storage.TombExpireKey(int64(binary.BigEndian.Uint64(v)), id))]; !ok {
				fail("tombstone %q has no expiry entry", k)
			}
		case strings.HasPrefix(k, "j/e/"):
			if len(k) < len("j/e/")+9 {
				fail("tombstone expiry %q: malformed", k)
			} else if _, ok := ks.deps["j/t/"+k[len("j/e/")+9:]]; !ok {
				fail("tombstone expiry %q has no tombstone", k)
			}
		default:
			fail("unknown dependency key %q", k)
		}
	}
	recount := map[string]uint64{}
	for id, task := range ks.tasks {
		if task.GetState() != pb.TaskState_TASK_STATE_WAITING {
			continue
		}
		recount[string(storage.WaitingCountKey(task.GetQueue(), task.GetTenant()))]++
		if n := keysOf[id]; task.GetWaiting() == 0 || int(task.GetWaiting()) != n {
			fail("waiting task %s waits on %d, has %d child index keys", id, task.GetWaiting(), n)
		}
	}
	if !maps.Equal(counts, recount) {
		fail("waiting counts %v, recount %v", counts, recount)
	}
}

// depsSeeds are fuzz seeds: a small DAG in one Enqueue, one child of
// policy RUN, and a task waiting on a live running task of the prefix
// (refused INVALID_ARGUMENT when that task is another tenant's).
func depsSeeds(now int64, p *fuzzPrefix) []*pb.Command {
	root, mid, leaf := nt("emails", "acme", 0), nt("emails", "acme", 3), nt("emails", "acme", 0)
	mid.AfterIndex = []uint32{0}
	leaf.AfterIndex, leaf.OnParentFailure = []uint32{0, 1}, pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN
	ext := nt("emails", "acme", 0)
	ext.After = []string{p.running.id}
	return []*pb.Command{enqueueCmd(now, root, mid, leaf), enqueueCmd(now, ext)}
}
