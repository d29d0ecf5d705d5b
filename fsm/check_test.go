package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// keyspace is a full read of an FSM's Pebble database, split by prefix.
type keyspace struct {
	tasks   map[string]*pb.Task
	index   map[string]bool   // every index key: q/, w/, l/, e/
	idem    map[string]string // i/ key -> task id
	catalog map[QueueRef]storage.QueueMeta
	tenants map[string]storage.TenantUsage
	tokens  map[string]string // k/ key -> value (token records and their index)
	applied uint64
	now     uint64
	feature uint64 // the latch; 0 when absent
	configs int    // g/ records
	// schedules are the s/ records by "<tenant>/<name>".
	schedules map[string]*pb.Schedule
	deps      map[string][]byte // j/ keys (dependencies) -> value
}

func readKeyspace(t testing.TB, f *FSM) *keyspace {
	t.Helper()
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ks := &keyspace{tasks: map[string]*pb.Task{}, index: map[string]bool{}, idem: map[string]string{},
		catalog: map[QueueRef]storage.QueueMeta{}, tenants: map[string]storage.TenantUsage{}, tokens: map[string]string{},
		deps: map[string][]byte{}}
	split := map[string]bool{}    // tasks stored in the split format with a body
	bodies := map[string][]byte{} // v/ id -> payload
	err = storage.Scan(r, nil, nil, 0, func(k, v []byte) error {
		switch {
		case bytes.HasPrefix(k, []byte("t/")):
			task, format, err := storage.DecodeTaskRecord(v)
			if err != nil {
				return fmt.Errorf("task %q: %w", k, err)
			}
			if format == storage.FormatSplit {
				split[task.GetId()] = true
			}
			if id := string(k[2:]); id != task.GetId() {
				return fmt.Errorf("task key %q holds task %s", k, task.GetId())
			}
			ks.tasks[task.GetId()] = task
		case bytes.HasPrefix(k, []byte("q/")), bytes.HasPrefix(k, []byte("w/")),
			bytes.HasPrefix(k, []byte("l/")), bytes.HasPrefix(k, []byte("e/")), bytes.HasPrefix(k, []byte("o/")):
			if len(v) != 0 {
				return fmt.Errorf("index key %q has a value", k)
			}
			ks.index[string(k)] = true
		case bytes.HasPrefix(k, storage.BodyPrefix()):
			bodies[string(k[len(storage.BodyPrefix()):])] = append([]byte(nil), v...)
		case bytes.HasPrefix(k, []byte("i/")):
			ks.idem[string(k)] = string(v)
		case bytes.HasPrefix(k, []byte("c/")):
			q, tn, err := storage.ParseCatalogKey(k)
			if err != nil {
				return err
			}
			m, err := storage.UnmarshalQueueMeta(v)
			if err != nil {
				return err
			}
			ks.catalog[QueueRef{q, tn}] = m
		case bytes.HasPrefix(k, storage.TenantPrefix()):
			u, err := storage.UnmarshalTenantUsage(v)
			if err != nil {
				return err
			}
			ks.tenants[string(k[len(storage.TenantPrefix()):])] = u
		case bytes.HasPrefix(k, []byte("k/")):
			ks.tokens[string(k)] = string(v)
		case bytes.HasPrefix(k, storage.DepsPrefix()):
			ks.deps[string(k)] = bytes.Clone(v)
		case bytes.HasPrefix(k, []byte("f/")):
			// A key's record holds something, or it is not stored
			// (storage.PutKeyState); checkKeyed compares the rest.
			s := &pb.KeyState{}
			if err := proto.Unmarshal(v, s); err != nil || proto.Size(s) == 0 {
				return fmt.Errorf("key state %q: %x is no key state (%v)", k, v, err)
			}
		case bytes.HasPrefix(k, storage.QueueConfigPrefix()):
			// Only a queue with a setting away from the default has a
			// record (storage.PutQueueConfig).
			c := &pb.QueueConfig{}
			if err := proto.Unmarshal(v, c); err != nil || proto.Size(c) == 0 {
				return fmt.Errorf("queue config %q: %x is no config away from the default (%v)", k, v, err)
			}
			ks.configs++
		case bytes.HasPrefix(k, storage.SchedulePrefix()):
			sc := &pb.Schedule{}
			if err := proto.Unmarshal(v, sc); err != nil {
				return fmt.Errorf("schedule %q: %w", k, err)
			}
			if !bytes.Equal(k, storage.ScheduleKey(sc.GetTenant(), sc.GetName())) {
				return fmt.Errorf("schedule %q holds %s/%s", k, sc.GetTenant(), sc.GetName())
			}
			if ks.schedules == nil {
				ks.schedules = map[string]*pb.Schedule{}
			}
			ks.schedules[sc.GetTenant()+"/"+sc.GetName()] = sc
		case bytes.Equal(k, storage.KeyFeature):
			if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 || binary.BigEndian.Uint64(v) > uint64(FeatureLevel) {
				return fmt.Errorf("%q: %x is no feature level", k, v)
			}
			ks.feature = binary.BigEndian.Uint64(v)
		case bytes.Equal(k, storage.KeyClusterID):
			if err := checkClusterID(string(v)); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		case bytes.Equal(k, storage.KeyApplied), bytes.Equal(k, storage.KeyNow):
			if len(v) != 8 {
				return fmt.Errorf("%q: %d bytes", k, len(v))
			}
			if bytes.Equal(k, storage.KeyApplied) {
				ks.applied = binary.BigEndian.Uint64(v)
			} else {
				ks.now = binary.BigEndian.Uint64(v)
			}
		default:
			return fmt.Errorf("unknown key %q", k)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read keyspace: %v", err)
	}
	// A split record and its body come and go together.
	for id := range split {
		body, ok := bodies[id]
		if !ok {
			t.Fatalf("read keyspace: split task %s has no body", id)
		}
		ks.tasks[id].Payload = body
		delete(bodies, id)
	}
	for id := range bodies {
		t.Fatalf("read keyspace: body v/%s without a split task record", id)
	}
	return ks
}

// wantIndexKeys are the index keys that must point at task at feature
// level level, worked out from the keyspace layout (storage/DESIGN.md),
// not from txn.indexKeys.
func wantIndexKeys(level uint32, task *pb.Task) []string {
	q, tn, id := task.GetQueue(), task.GetTenant(), task.GetId()
	var keys [][]byte
	switch task.GetState() {
	case pb.TaskState_TASK_STATE_PENDING:
		if level < LevelPendingInMemory { // from it on, the ready order is the index
			keys = [][]byte{storage.PendingKey(q, tn, task.GetPriority(), task.GetSeq(), id)}
		}
	case pb.TaskState_TASK_STATE_DELAYED:
		if level < LevelDelayedInMemory { // from it on, the delayed orders are the index
			keys = [][]byte{storage.DelayedKey(q, tn, task.GetVisibleAt(), id), storage.WakeKey(task.GetVisibleAt(), id)}
		}
	case pb.TaskState_TASK_STATE_RUNNING:
		if level >= LevelRunningInMemory { // from it on, the running order is the index
			break
		}
		keys = [][]byte{storage.RunningKey(q, tn, id), storage.LeaseKey(task.GetLeaseUntil(), id)}
		if task.GetDeadlineAt() > 0 {
			keys = append(keys, storage.DeadlineKey(task.GetDeadlineAt(), id))
		}
	case pb.TaskState_TASK_STATE_DEAD:
		keys = [][]byte{storage.DeadKey(q, tn, id)}
		// Dead-lettered since LevelRetries: retention purges it; from
		// LevelExpiryInMemory on the expiry order alone holds the time.
		if task.GetExpireAt() > 0 && level < LevelExpiryInMemory {
			keys = append(keys, storage.ExpireKey(task.GetExpireAt(), id))
		}
	case pb.TaskState_TASK_STATE_WAITING:
		keys = [][]byte{storage.WaitingKey(q, tn, id)}
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		if level < LevelExpiryInMemory {
			keys = [][]byte{storage.ExpireKey(task.GetExpireAt(), id)}
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

// checkKeyspace walks every key of f and asserts the FSM's invariants:
// each task sits in exactly the indexes of its state and no index key is
// left over; the catalog counters equal a full recount and Stats reports
// them; head hints are lower bounds; below LevelIdemInMemory idempotency
// keys and tasks point at each other, from it on there is no i/ key, and
// at every level the idempotency index holds exactly the tasks' keys; the
// metadata matches AppliedIndex and Now; each tenant's usage record
// equals a recount of its tasks and their bytes. It returns the recount.
func checkKeyspace(t testing.TB, f *FSM) map[QueueRef]storage.QueueMeta {
	t.Helper()
	checkIdemIndex(t, f)
	checkClaimView(t, f)
	checkReadyOrder(t, f)
	checkKeyed(t, f)
	ks := readKeyspace(t, f)
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	owner := map[string]string{}
	recount := map[QueueRef]storage.QueueMeta{}
	usage := map[string]storage.TenantUsage{}
	for id, task := range ks.tasks {
		u := usage[task.GetTenant()]
		u.Add(1, int64(proto.Size(task)))
		if task.GetState() == pb.TaskState_TASK_STATE_RUNNING {
			u.Running++
		}
		usage[task.GetTenant()] = u
		for _, k := range wantIndexKeys(f.EnabledLevel(), task) {
			if other, dup := owner[k]; dup {
				fail("index key %q claimed by %s and %s", k, other, id)
			}
			owner[k] = id
			if !ks.index[k] {
				fail("task %s (%v) misses index key %q", id, task.GetState(), k)
			}
		}
		ref := QueueRef{task.GetQueue(), task.GetTenant()}
		m := recount[ref]
		m.Count(task.GetState(), +1)
		recount[ref] = m
		switch task.GetState() {
		case pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED, pb.TaskState_TASK_STATE_RUNNING:
			if task.GetAttempts() >= task.GetMaxAttempts() {
				fail("task %s %v with %d of %d attempts", id, task.GetState(), task.GetAttempts(), task.GetMaxAttempts())
			}
		case pb.TaskState_TASK_STATE_DEAD:
			if task.GetAttempts() < task.GetMaxAttempts() {
				fail("dead task %s with %d of %d attempts", id, task.GetAttempts(), task.GetMaxAttempts())
			}
		}
		if task.GetState() == pb.TaskState_TASK_STATE_PENDING {
			if head := ks.catalog[ref].Head[task.GetPriority()]; task.GetSeq() < head {
				fail("pending task %s seq %d below head hint %d", id, task.GetSeq(), head)
			}
		}
		if task.GetState() == pb.TaskState_TASK_STATE_RUNNING && (task.GetFence() == 0 || task.GetFence() > ks.applied) {
			fail("running task %s has fence %d (applied %d)", id, task.GetFence(), ks.applied)
		}
		checkHistory(task, ks.feature, fail)
		if key := task.GetIdempotencyKey(); key != "" && ks.feature < uint64(LevelIdemInMemory) {
			ik := string(storage.IdemKey(task.GetQueue(), task.GetTenant(), key))
			if ks.idem[ik] != id {
				fail("task %s: idempotency key %q points at %q", id, ik, ks.idem[ik])
			}
		}
	}
	for k := range ks.index {
		if _, ok := owner[k]; !ok {
			fail("stray index key %q", k)
		}
	}
	checkDepsKeyspace(ks, fail)
	for ik, id := range ks.idem {
		if ks.feature >= uint64(LevelIdemInMemory) {
			fail("idempotency key %q (to %s) stored at level %d", ik, id, ks.feature)
		}
		if task, ok := ks.tasks[id]; !ok {
			fail("idempotency key %q points at missing task %s", ik, id)
		} else if want := string(storage.IdemKey(task.GetQueue(), task.GetTenant(), task.GetIdempotencyKey())); want != ik {
			fail("idempotency key %q points at task %s whose key is %q", ik, id, want)
		}
	}
	for ref, got := range ks.catalog {
		want := recount[ref]
		want.Head = got.Head
		// Lifetime totals cannot be recounted from the tasks left; they
		// exist only once the latch turned them on.
		if got.Totals != nil && ks.feature < uint64(LevelCounters) {
			fail("catalog %v has totals before the latch (level %d)", ref, ks.feature)
		}
		if got.Totals != nil && got.Totals.HasReleased && ks.feature < uint64(LevelAttempts) {
			fail("catalog %v counts releases before the latch (level %d)", ref, ks.feature)
		}
		want.Totals = got.Totals
		if got != want {
			fail("catalog %v: counters %+v, recount %+v", ref, got, want)
		}
	}
	for tn, want := range usage {
		// The running count is kept from the LevelLimits latch on (a
		// version 2 record); the limit is configuration, not a count.
		got := ks.tenants[tn]
		if !got.HasRunning {
			want.Running = 0
		}
		want.MaxRunning, want.HasRunning = got.MaxRunning, got.HasRunning
		if got != want {
			fail("tenant %s usage %+v, recount %+v", tn, got, want)
		}
	}
	for tn, got := range ks.tenants {
		if _, ok := usage[tn]; !ok && (got.Tasks != 0 || got.Bytes != 0 || got.Running != 0) {
			fail("tenant %s without tasks has usage %+v", tn, got)
		}
	}
	for ref := range recount {
		if _, ok := ks.catalog[ref]; !ok {
			fail("queue %v has tasks but no catalog record", ref)
		}
	}
	// Tokens: every accessor index names a record whose accessor it is,
	// and every record has its index.
	records, indexes := 0, 0
	for k, v := range ks.tokens {
		switch {
		case strings.HasPrefix(k, "k/a/"):
			indexes++
			rec, ok := ks.tokens["k/h/"+v]
			tok := &pb.Token{}
			if !ok || proto.Unmarshal([]byte(rec), tok) != nil || tok.GetAccessor() != k[4:] {
				fail("token index %s -> %s: no matching record", k, v)
			}
		case strings.HasPrefix(k, "k/h/"):
			records++
		case k != string(storage.KeyBootstrapped):
			fail("unknown token key %q", k)
		}
	}
	if records != indexes {
		fail("%d token records, %d accessor indexes", records, indexes)
	}
	if ks.applied != f.AppliedIndex() || int64(ks.now) != max(f.Now(), 0) {
		fail("metadata applied %d now %d; FSM says %d and %d", ks.applied, ks.now, f.AppliedIndex(), f.Now())
	}
	stats, err := f.Stats("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		m := recount[QueueRef{s.GetQueue(), s.GetTenant()}]
		got := storage.QueueMeta{Pending: s.GetPending(), Delayed: s.GetDelayed(), Running: s.GetRunning(),
			Dead: s.GetDead(), Finished: s.GetCompleted()}
		m.Head = got.Head
		if got != m {
			fail("Stats %s/%s = %+v, recount %+v", s.GetQueue(), s.GetTenant(), got, m)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		for _, p := range problems {
			t.Error(p)
		}
		t.FailNow()
	}
	return recount
}

// stateHash hashes every key outside m/: what a rejected command must leave
// unchanged. It still advances the applied index, and a business rejection
// (stale fence, wrong state) still advances time; callers check Now apart.
func stateHash(t testing.TB, f *FSM) string {
	t.Helper()
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	h := sha256.New()
	err = storage.Scan(r, nil, nil, 0, func(k, v []byte) error {
		if bytes.HasPrefix(k, []byte("m/")) {
			return nil
		}
		fmt.Fprintf(h, "%d:%q=%d:%q;", len(k), k, len(v), v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// attempts maps each task to its (attempts, claims): the counters a
// replayed entry must not bump again.
func attempts(t testing.TB, f *FSM) map[string][2]uint32 {
	t.Helper()
	out := map[string][2]uint32{}
	for id, task := range readKeyspace(t, f).tasks {
		out[id] = [2]uint32{task.GetAttempts(), task.GetClaims()}
	}
	return out
}

// checkHistory asserts the attempt history's invariants: none before
// LevelAttempts; at most MaxHistory records, in claim and fence order;
// only the last may be open, and only when the task runs under its fence;
// an ended one has an outcome; errors within their bound.
func checkHistory(task *pb.Task, feature uint64, fail func(string, ...any)) {
	h := task.GetHistory()
	if len(h) == 0 {
		return
	}
	id := task.GetId()
	if feature < uint64(LevelAttempts) {
		fail("task %s has %d attempts before the latch (level %d)", id, len(h), feature)
	}
	if len(h) > MaxHistory {
		fail("task %s keeps %d attempts, more than %d", id, len(h), MaxHistory)
	}
	for i, a := range h {
		if i > 0 && (a.GetClaim() <= h[i-1].GetClaim() || a.GetFence() <= h[i-1].GetFence()) {
			fail("task %s attempt %d (claim %d, fence %d) not after claim %d, fence %d", id, i, a.GetClaim(), a.GetFence(), h[i-1].GetClaim(), h[i-1].GetFence())
		}
		if a.GetClaim() == 0 || a.GetClaim() > task.GetClaims() || a.GetFence() == 0 || a.GetFence() > task.GetFence() {
			fail("task %s attempt %d: claim %d of %d, fence %d of %d", id, i, a.GetClaim(), task.GetClaims(), a.GetFence(), task.GetFence())
		}
		if len(a.GetError()) > MaxAttemptError {
			fail("task %s attempt %d error of %d bytes", id, i, len(a.GetError()))
		}
		open := a.GetEndedAt() == 0
		if open != (a.GetOutcome() == pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED) {
			fail("task %s attempt %d: ended_at %d with outcome %v", id, i, a.GetEndedAt(), a.GetOutcome())
		}
		running := task.GetState() == pb.TaskState_TASK_STATE_RUNNING && a.GetFence() == task.GetFence()
		if open && (i != len(h)-1 || !running) {
			fail("task %s attempt %d is open, but the task is %v under fence %d", id, i, task.GetState(), task.GetFence())
		}
		if open && a.GetLeaseUntil() != task.GetLeaseUntil() {
			fail("task %s open attempt lease %d, task's %d", id, a.GetLeaseUntil(), task.GetLeaseUntil())
		}
	}
}
