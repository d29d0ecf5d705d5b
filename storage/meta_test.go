package storage

import (
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_QueueMetaRoundTrip(t *testing.T) {
	cases := []QueueMeta{
		{},
		{Pending: 1, Delayed: 2, Running: 3, Dead: 4, Finished: 5},
		{Pending: math.MaxUint64, Finished: 1 << 40, Head: [Priorities]uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, math.MaxUint64}},
	}
	for _, m := range cases {
		b := m.Marshal()
		if len(b) != metaLenV1 {
			t.Errorf("Marshal: %d bytes, want %d", len(b), metaLenV1)
		}
		got, err := UnmarshalQueueMeta(b)
		if err != nil || got != m {
			t.Errorf("round trip of %+v = %+v, %v", m, got, err)
		}
	}
}

func Test_QueueMetaRejectsBadBytes(t *testing.T) {
	good := (&QueueMeta{Pending: 1}).Marshal()
	wrongVersion := append([]byte{}, good...)
	wrongVersion[0] = 2
	for name, b := range map[string][]byte{
		"empty":         nil,
		"short":         good[:len(good)-1],
		"wrong version": wrongVersion,
	} {
		if _, err := UnmarshalQueueMeta(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func Test_QueueMetaCount(t *testing.T) {
	cases := []struct {
		state pb.TaskState
		delta int
		start QueueMeta
		want  QueueMeta
	}{
		{pb.TaskState_TASK_STATE_PENDING, 1, QueueMeta{}, QueueMeta{Pending: 1}},
		{pb.TaskState_TASK_STATE_DELAYED, 1, QueueMeta{}, QueueMeta{Delayed: 1}},
		{pb.TaskState_TASK_STATE_RUNNING, -1, QueueMeta{Running: 2}, QueueMeta{Running: 1}},
		{pb.TaskState_TASK_STATE_DEAD, 1, QueueMeta{}, QueueMeta{Dead: 1}},
		{pb.TaskState_TASK_STATE_COMPLETED, 1, QueueMeta{}, QueueMeta{Finished: 1}},
		{pb.TaskState_TASK_STATE_FAILED, 1, QueueMeta{Finished: 1}, QueueMeta{Finished: 2}},
		{pb.TaskState_TASK_STATE_CANCELLED, -1, QueueMeta{Finished: 1}, QueueMeta{}},
		{pb.TaskState_TASK_STATE_UNSPECIFIED, 1, QueueMeta{}, QueueMeta{}},
		{pb.TaskState_TASK_STATE_PENDING, -1, QueueMeta{}, QueueMeta{}}, // never wraps
	}
	for _, c := range cases {
		m := c.start
		m.Count(c.state, c.delta)
		if m != c.want {
			t.Errorf("Count(%v, %d) on %+v = %+v, want %+v", c.state, c.delta, c.start, m, c.want)
		}
	}
}

func Test_GetQueueMetaMissingIsZero(t *testing.T) {
	db := mustOpenDB(t)
	m, err := GetQueueMeta(Wrap(db), "q", "t")
	if err != nil || m != (QueueMeta{}) {
		t.Fatalf("GetQueueMeta of a missing queue = %+v, %v", m, err)
	}
	want := QueueMeta{Running: 3, Head: [Priorities]uint64{9: 42}}
	mustCommit(t, db, func(b *pebble.Batch) error { return PutQueueMeta(b, "q", "t", &want) })
	if m, err = GetQueueMeta(Wrap(db), "q", "t"); err != nil || m != want {
		t.Fatalf("GetQueueMeta = %+v, %v; want %+v", m, err, want)
	}
}

// Totals keep their version: a record with totals but no releases is
// version 2, byte for byte what a level-5 build writes; with HasReleased
// it is version 3 and keeps Released.
func Test_QueueMetaTotalsVersions(t *testing.T) {
	v2 := QueueMeta{Pending: 1, Totals: &QueueTotals{Enqueued: 2, Expired: 3, Released: 9}}
	b := v2.Marshal()
	if b[0] != metaVersion2 || len(b) != metaLenV2 {
		t.Fatalf("totals without releases: version %d, %d bytes", b[0], len(b))
	}
	if got, err := UnmarshalQueueMeta(b); err != nil || got.Totals.Released != 0 || got.Totals.HasReleased || got.Totals.Expired != 3 {
		t.Fatalf("version 2 read back as %+v, %v", got.Totals, err)
	}
	v3 := QueueMeta{Pending: 1, Totals: &QueueTotals{Enqueued: 2, Expired: 3, Released: 9, HasReleased: true}}
	b = v3.Marshal()
	if b[0] != metaVersion3 || len(b) != metaLenV3 {
		t.Fatalf("totals with releases: version %d, %d bytes", b[0], len(b))
	}
	got, err := UnmarshalQueueMeta(b)
	if err != nil || *got.Totals != *v3.Totals {
		t.Fatalf("version 3 read back as %+v, %v", got.Totals, err)
	}
	if _, err := UnmarshalQueueMeta(b[:len(b)-1]); err == nil {
		t.Fatal("a short version 3 record accepted")
	}
}
