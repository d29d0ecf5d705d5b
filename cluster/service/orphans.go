package service

import (
	"sync"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// maxOrphans bounds the orphans a node remembers. An orphan matters only
// until its lease ends (30 s by default), and releases that fail come in
// bursts of one Claim's tasks at most, so 1,024 (about 64 KiB) outlives
// any lease a dashboard could show it for.
const maxOrphans = 1024

// orphan is a claim whose answer did not reach its worker: the task and
// the claim's fence, since a later claim of the same task is not one.
type orphan struct {
	id    string
	fence uint64
}

// orphanSet remembers the newest maxOrphans orphans, first in first out.
// It is node-local: the node that saw the answer go undelivered (the
// leader, or the follower a Claim was forwarded through) knows, no other.
type orphanSet struct {
	mu   sync.Mutex
	ring [maxOrphans]orphan
	next int // the slot the next orphan takes, evicting its holder
	set  map[orphan]struct{}
}

func newOrphanSet() *orphanSet { return &orphanSet{set: map[orphan]struct{}{}} }

// add remembers the tasks' claims as orphaned.
func (o *orphanSet) add(tasks []*pb.Task) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range tasks {
		k := orphan{t.GetId(), t.GetFence()}
		if _, ok := o.set[k]; ok {
			continue
		}
		if old := o.ring[o.next]; old.id != "" {
			delete(o.set, old)
		}
		o.ring[o.next] = k
		o.set[k] = struct{}{}
		o.next = (o.next + 1) % maxOrphans
	}
}

// forget drops claims that were put back: their tasks are no longer
// running under them. The ring slot stays until reused.
func (o *orphanSet) forget(items []*pb.ReapItem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range items {
		delete(o.set, orphan{it.GetTaskId(), it.GetFence()})
	}
}

// match returns the ids of the tasks that run under an orphaned claim.
func (o *orphanSet) match(tasks []*pb.Task) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for _, t := range tasks {
		if t.GetState() != pb.TaskState_TASK_STATE_RUNNING {
			continue
		}
		if _, ok := o.set[orphan{t.GetId(), t.GetFence()}]; ok {
			ids = append(ids, t.GetId())
		}
	}
	return ids
}

func (o *orphanSet) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.set)
}

// Orphaned returns the ids of those tasks (as read from the replica, with
// their fences) that still run under a claim whose answer this node saw
// go undelivered and could not put back: nobody works on them until their
// lease expires and the reaper requeues them. The dashboard's Live leases
// page highlights them.
func (s *Service) Orphaned(tasks []*pb.Task) []string { return s.orphans.match(tasks) }
