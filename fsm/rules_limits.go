package fsm

import (
	"fmt"
	"math"
	"sort"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Limits (LevelLimits = 10). A queue's concurrency and rate limits live in
// its configuration record (g/), next to pause; a tenant's concurrency
// limit lives in its usage record (u/), next to the count of its running
// tasks that the limit is checked against. Every number is an integer
// computed from the stamped now, so every replica takes the same tasks.

const (
	// MaxRateMilli bounds a rate: a million tasks a second.
	MaxRateMilli = 1_000_000_000
	// MaxBurst bounds a token bucket's size.
	MaxBurst = 1_000_000
)

func validateSetQueueLimits(c *pb.SetQueueLimitsCmd) error {
	if c.GetQueue() == "" {
		if err := checkName("tenant", c.GetTenant()); err != nil {
			return err
		}
		if c.RateMilli != nil || c.Burst != nil {
			return fieldErr("rate_milli", "a tenant's own limit is a concurrency limit; a rate needs a queue")
		}
		if c.MaxRunning == nil {
			return fieldErr("max_running", "give the tenant's concurrency limit (0 clears it)")
		}
		if c.MaxRunningPerKey != nil || c.Order != nil || c.PerKeyPending != nil || c.PerKeyPendingDepth != nil {
			return fieldErr("max_running_per_key", "per-key rules need a queue")
		}
		return nil
	}
	if err := checkQueue("", c.GetQueue(), c.GetTenant()); err != nil {
		return err
	}
	if c.MaxRunning == nil && c.RateMilli == nil && c.Burst == nil && c.MaxRunningPerKey == nil &&
		c.Order == nil && c.PerKeyPending == nil && c.PerKeyPendingDepth == nil {
		return fieldErr("max_running", "give at least one limit (0 clears it)")
	}
	if _, ok := pb.QueueOrder_name[int32(c.GetOrder())]; !ok {
		return fieldErr("order", "unknown order %d", c.GetOrder())
	}
	if _, ok := pb.PerKeyPending_name[int32(c.GetPerKeyPending())]; !ok {
		return fieldErr("per_key_pending", "unknown rule %d", c.GetPerKeyPending())
	}
	if c.GetPerKeyPendingDepth() > MaxPerKeyDepth {
		return fieldErr("per_key_pending_depth", "%d over %d", c.GetPerKeyPendingDepth(), MaxPerKeyDepth)
	}
	if c.GetRateMilli() > MaxRateMilli {
		return fieldErr("rate_milli", "%d over %d (a million tasks a second)", c.GetRateMilli(), MaxRateMilli)
	}
	if c.GetBurst() > MaxBurst {
		return fieldErr("burst", "%d over %d", c.GetBurst(), MaxBurst)
	}
	return nil
}

// bucket is a token bucket in GCRA form: its whole moving state is one
// time, tat (QueueConfig.rate_tat), at or before which the bucket is full.
// Taking n tokens moves tat n intervals later; time going by refills it.
// One int64 to store, and no division of time by a rate at apply.
type bucket struct {
	interval int64 // ns per token: 1e12 / rate_milli, at least 1000
	size     int64 // tokens when full, 1..MaxBurst
}

// bucketOf is the queue's bucket; ok is false when it has no rate limit.
func bucketOf(cfg *pb.QueueConfig) (bucket, bool) {
	rate := cfg.GetRateMilli()
	if rate == 0 {
		return bucket{}, false
	}
	rate = min(rate, MaxRateMilli) // Validate bounds it; this keeps the math safe whatever is stored
	size := int64(min(cfg.GetBurst(), MaxBurst))
	if size == 0 {
		size = max(1, int64(rate/1000))
	}
	return bucket{interval: int64(1_000_000_000_000 / rate), size: size}, true
}

// full is the time one full bucket takes to refill: at most 1e18 ns.
func (b bucket) full() int64 { return b.size * b.interval }

// tokens is how many whole tokens the bucket holds at now.
func (b bucket) tokens(tat, now int64) int64 {
	room := b.full() - (max(tat, now) - now)
	if room <= 0 {
		return 0
	}
	return room / b.interval
}

// tokensMilli is tokens with three decimals, for Stats.
func (b bucket) tokensMilli(tat, now int64) uint64 {
	room := b.full() - (max(tat, now) - now)
	if room <= 0 {
		return 0
	}
	return uint64(room/b.interval)*1000 + uint64(room%b.interval*1000/b.interval)
}

// take is the bucket's state after n tokens (at most tokens) left it.
func (b bucket) take(tat, now int64, n int64) int64 { return max(tat, now) + n*b.interval }

// next is when the bucket holds a whole token again.
func (b bucket) next(tat int64) int64 { return tat - (b.size-1)*b.interval }

// allowance is how many of want tasks a claim may take under cfg's limits
// and the tenant's (u), with running tasks of the queue, at now; and, when
// the rate limit leaves none, when the next token is due (0 otherwise).
func allowance(cfg *pb.QueueConfig, running uint64, u storage.TenantUsage, now int64, want int) (int, int64) {
	n := want
	if m := uint64(cfg.GetMaxRunning()); m > 0 {
		n = min(n, int(min(subFloor(m, running), math.MaxInt32)))
	}
	if u.HasRunning && u.MaxRunning > 0 {
		n = min(n, int(min(subFloor(u.MaxRunning, u.Running), math.MaxInt32)))
	}
	var next int64
	if b, ok := bucketOf(cfg); ok {
		tok := b.tokens(cfg.GetRateTat(), now)
		if tok == 0 {
			next = b.next(cfg.GetRateTat())
		}
		n = min(n, int(min(tok, math.MaxInt32)))
	}
	return max(n, 0), next
}

func subFloor(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// admitClaim reads the queue's configuration and says how many tasks a
// claim of up to want may take: none when paused or when a limit leaves
// none, in which case the claim writes nothing. It returns the
// configuration for spendTokens.
func (tx *txn) admitClaim(q, tn string, want int) (*pb.QueueConfig, int, error) {
	cfg, err := storage.GetQueueConfig(tx.r, q, tn)
	if err != nil || cfg.GetPaused() {
		return cfg, 0, err // a paused queue hands out nothing: an empty answer
	}
	m, err := tx.meta(q, tn, false)
	if err != nil {
		return nil, 0, err
	}
	e, err := tx.usage(tn)
	if err != nil {
		return nil, 0, err
	}
	n, _ := allowance(cfg, m.Running, e.u, tx.now, want)
	return cfg, n, nil
}

// spendTokens takes n claimed tasks' tokens from the queue's bucket.
func (tx *txn) spendTokens(q, tn string, cfg *pb.QueueConfig, n int) error {
	b, ok := bucketOf(cfg)
	if !ok || n == 0 {
		return nil
	}
	cfg.RateTat = b.take(cfg.GetRateTat(), tx.now, int64(n))
	return tx.putConfig(q, tn, cfg)
}

// countRunning keeps the tenant's running count (from the latch on, or
// from a tenant limit set before it, which the leader never proposes but
// the FSM does not refuse) and
// announces the tasks a running task's end may let a claim take: its own
// queue's pending ones, and with a tenant limit those of every queue of
// the tenant (Event.Freed). m is the queue's catalog record after the move.
func (tx *txn) countRunning(t *pb.Task, from pb.TaskState, m *storage.QueueMeta) error {
	was, is := from == pb.TaskState_TASK_STATE_RUNNING, t.GetState() == pb.TaskState_TASK_STATE_RUNNING
	if was == is {
		return nil
	}
	if was && m.Pending > 0 {
		tx.announcePending(t.GetQueue(), t.GetTenant())
	}
	e, err := tx.usage(t.GetTenant())
	if err != nil {
		return err
	}
	if tx.feature < LevelLimits && !e.u.HasRunning {
		return nil
	}
	e.u.HasRunning, e.dirty = true, true
	if is {
		e.u.Running++
		return nil
	}
	e.u.Running = subFloor(e.u.Running, 1)
	if e.u.MaxRunning > 0 {
		tx.announceFreed(t.GetTenant())
	}
	return nil
}

// announceFreed names a tenant whose concurrency limit may now let a
// claim of any of its queues take a task.
func (tx *txn) announceFreed(tenant string) {
	for _, tn := range tx.ev.Freed {
		if tn == tenant {
			return
		}
	}
	tx.ev.Freed = append(tx.ev.Freed, tenant)
}

// setQueueLimits sets the given limits of a queue, or of a tenant when
// the queue is empty. Like pausing, it writes the queue's catalog record,
// so Stats lists a queue with limits and no task yet. Any change
// announces the queue's pending tasks, so long polls look again.
func (tx *txn) setQueueLimits(c *pb.SetQueueLimitsCmd, res *pb.CommandResult) error {
	if c.GetQueue() == "" {
		return tx.setTenantLimit(c, res)
	}
	q, tn := c.GetQueue(), c.GetTenant()
	cfg, err := storage.GetQueueConfig(tx.r, q, tn)
	if err != nil {
		return err
	}
	changed, rate := false, false
	if c.MaxRunning != nil && c.GetMaxRunning() != cfg.GetMaxRunning() {
		cfg.MaxRunning, changed = c.GetMaxRunning(), true
	}
	if c.RateMilli != nil && c.GetRateMilli() != cfg.GetRateMilli() {
		cfg.RateMilli, rate = c.GetRateMilli(), true
	}
	if c.Burst != nil && c.GetBurst() != cfg.GetBurst() {
		cfg.Burst, rate = c.GetBurst(), true
	}
	if c.MaxRunningPerKey != nil && c.GetMaxRunningPerKey() != cfg.GetMaxRunningPerKey() {
		cfg.MaxRunningPerKey, changed = c.GetMaxRunningPerKey(), true
	}
	if c.Order != nil && c.GetOrder() != cfg.GetOrder() {
		cfg.Order, changed = c.GetOrder(), true
	}
	if c.PerKeyPending != nil && c.GetPerKeyPending() != cfg.GetPerKeyPending() {
		cfg.PerKeyPending, changed = c.GetPerKeyPending(), true
	}
	if c.PerKeyPendingDepth != nil && c.GetPerKeyPendingDepth() != cfg.GetPerKeyPendingDepth() {
		cfg.PerKeyPendingDepth, changed = c.GetPerKeyPendingDepth(), true
	}
	if !changed && !rate {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_ALREADY_DONE})
		return nil
	}
	if rate {
		cfg.RateTat = 0 // a new rate starts with a full bucket
	}
	if cfg.GetRateMilli() == 0 {
		cfg.Burst = 0 // a burst means nothing without a rate; the record may go
	}
	if err := tx.putConfig(q, tn, cfg); err != nil {
		return err
	}
	m, err := tx.meta(q, tn, true)
	if err != nil {
		return err
	}
	if m.Pending > 0 {
		tx.announcePending(q, tn)
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK})
	return nil
}

// setTenantLimit sets a tenant's concurrency limit, kept in its usage
// record next to its running count.
func (tx *txn) setTenantLimit(c *pb.SetQueueLimitsCmd, res *pb.CommandResult) error {
	e, err := tx.usage(c.GetTenant())
	if err != nil {
		return err
	}
	v := uint64(c.GetMaxRunning())
	if e.u.HasRunning && e.u.MaxRunning == v {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_ALREADY_DONE})
		return nil
	}
	if !e.u.HasRunning {
		// Before the latch nothing counted the tenant's running tasks.
		if err := tx.countTenantsRunning(c.GetTenant()); err != nil {
			return err
		}
	}
	e.u.MaxRunning, e.u.HasRunning, e.dirty = v, true, true
	tx.announceFreed(c.GetTenant())
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK})
	return nil
}

// countTenantsRunning runs at the LevelLimits latch (only == ""), or for
// one tenant whose limit is set before it: it sets each tenant's running
// count from its queues' catalog records, so that a tenant limit counts
// the tasks that were running before the latch. It reads the
// catalog records this batch holds in memory as well as the stored ones,
// so the answer does not depend on how entries were batched.
func (tx *txn) countTenantsRunning(only string) error {
	refs := map[[2]string]bool{}
	err := storage.Scan(tx.r, storage.CatalogPrefix(""), storage.PrefixEnd(storage.CatalogPrefix("")), 0, func(k, _ []byte) error {
		q, tn, err := storage.ParseCatalogKey(k)
		if only == "" || tn == only {
			refs[[2]string{q, tn}] = true
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("count running tasks per tenant: %w", err)
	}
	for _, e := range tx.metas {
		if only == "" || e.tenant == only {
			refs[[2]string{e.queue, e.tenant}] = true
		}
	}
	running := map[string]uint64{}
	for ref := range refs {
		m, err := tx.meta(ref[0], ref[1], false)
		if err != nil {
			return err
		}
		running[ref[1]] += m.Running
	}
	tenants := make([]string, 0, len(running))
	for tn, n := range running {
		if n > 0 {
			tenants = append(tenants, tn)
		}
	}
	sort.Strings(tenants)
	for _, tn := range tenants {
		e, err := tx.usage(tn)
		if err != nil {
			return err
		}
		e.u.Running, e.u.HasRunning, e.dirty = running[tn], true, true
	}
	return nil
}

// fillLimits adds to Stats what storage cannot compute: the bucket's
// tokens at the replica's last applied time, and each tenant's limit and
// running count.
func fillLimits(r storage.Reader, out []*pb.QueueStats, now int64) error {
	tenants := map[string]storage.TenantUsage{}
	for _, s := range out {
		if s.GetRateMilli() > 0 {
			cfg, err := storage.GetQueueConfig(r, s.GetQueue(), s.GetTenant())
			if err != nil {
				return err
			}
			if b, ok := bucketOf(cfg); ok {
				s.TokensMilli = b.tokensMilli(cfg.GetRateTat(), now)
				s.Burst = uint32(b.size)
			}
		}
		u, ok := tenants[s.GetTenant()]
		if !ok {
			var err error
			if u, err = storage.GetTenantUsage(r, s.GetTenant()); err != nil {
				return err
			}
			tenants[s.GetTenant()] = u
		}
		s.TenantMaxRunning = uint32(min(u.MaxRunning, math.MaxUint32))
		s.TenantRunning = u.Running
	}
	return nil
}
