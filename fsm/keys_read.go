package fsm

import (
	"sort"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// DefaultKeysLimit is how many keys each list of ListKeys holds when the
// caller names no limit; MaxKeysLimit bounds what it may ask for.
const (
	DefaultKeysLimit = 20
	MaxKeysLimit     = 1000
)

// Keys lists a keyed queue's top keys by backlog and by running, as the
// last applied batch left them (keyed.go). A queue without a per-key rule
// answers with keyed false. Keyless tasks, each its own key, are not
// listed. It walks every key of the queue: O(keys), for an operator's view.
func (f *FSM) Keys(queue, tenant string, limit int) (*pb.ListKeysResponse, error) {
	if limit <= 0 {
		limit = DefaultKeysLimit
	}
	limit = min(limit, MaxKeysLimit)
	f.keyed.mu.Lock()
	defer f.keyed.mu.Unlock()
	out := &pb.ListKeysResponse{}
	kq := f.keyed.queues[QueueRef{queue, tenant}]
	if kq == nil {
		return out, nil
	}
	out.Keyed = true
	var all []*pb.KeyStats
	for _, ks := range kq.keys {
		if ks.key == nil || (ks.npending == 0 && ks.running == 0) {
			continue
		}
		all = append(all, &pb.KeyStats{
			Key: append([]byte(nil), ks.key...), Pending: uint64(ks.npending), Running: ks.running,
			MaxRunning: ks.limitOr(kq.perKey), Weight: max(ks.weight, 1),
		})
	}
	out.Keys = uint64(len(all))
	top := func(by func(a, b *pb.KeyStats) bool) []*pb.KeyStats {
		s := append([]*pb.KeyStats(nil), all...)
		sort.Slice(s, func(i, j int) bool {
			if by(s[i], s[j]) {
				return true
			}
			if by(s[j], s[i]) {
				return false
			}
			return string(s[i].Key) < string(s[j].Key)
		})
		return s[:min(limit, len(s))]
	}
	out.ByBacklog = top(func(a, b *pb.KeyStats) bool { return a.Pending > b.Pending })
	out.ByRunning = top(func(a, b *pb.KeyStats) bool { return a.Running > b.Running })
	return out, nil
}

// limitOr is the key's limit: its override, or the queue's.
func (ks *keyState) limitOr(perKey uint32) uint32 {
	if ks.limit > 0 {
		return ks.limit
	}
	return perKey
}
