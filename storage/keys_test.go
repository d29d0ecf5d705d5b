package storage

import (
	"bytes"
	"math"
	"testing"
)

// Test_KeysOrderNumerically checks that byte order is the order the queue
// needs: time and seq numerically, priority highest first, then id.
func Test_KeysOrderNumerically(t *testing.T) {
	cases := []struct {
		name string
		keys [][]byte // strictly ascending
	}{
		{"lease by time", [][]byte{
			LeaseKey(0, "z"), LeaseKey(1, "a"), LeaseKey(255, "a"), LeaseKey(256, "a"),
			LeaseKey(1<<32, "a"), LeaseKey(math.MaxInt64, "a"),
		}},
		{"lease same time by id", [][]byte{LeaseKey(7, "a"), LeaseKey(7, "b"), LeaseKey(7, "ba")}},
		{"wake by time", [][]byte{WakeKey(9, "b"), WakeKey(10, "a"), WakeKey(1e18, "a")}},
		{"expire by time", [][]byte{ExpireKey(1, "b"), ExpireKey(2, "a"), ExpireKey(1<<40, "a")}},
		{"delayed by time", [][]byte{
			DelayedKey("q", "t", 1, "z"), DelayedKey("q", "t", 2, "a"), DelayedKey("q", "t", 1<<33, "a"),
		}},
		{"pending: priority 9 first", [][]byte{
			PendingKey("q", "t", 9, 500, "a"), PendingKey("q", "t", 5, 1, "a"), PendingKey("q", "t", 0, 0, "a"),
		}},
		{"pending: seq within priority", [][]byte{
			PendingKey("q", "t", 3, 0, "z"), PendingKey("q", "t", 3, 1, "a"), PendingKey("q", "t", 3, 255, "a"),
			PendingKey("q", "t", 3, 256, "a"), PendingKey("q", "t", 3, 1<<16, "a"), PendingKey("q", "t", 3, math.MaxUint64, "a"),
		}},
		{"pending: id breaks ties", [][]byte{PendingKey("q", "t", 3, 7, "a"), PendingKey("q", "t", 3, 7, "b")}},
		{"pending seek before its keys", [][]byte{
			PendingSeek("q", "t", 3, 7), PendingKey("q", "t", 3, 7, ""), PendingKey("q", "t", 3, 7, "a"), PendingSeek("q", "t", 3, 8),
		}},
		{"states inside one queue", [][]byte{
			DelayedPrefix("q", "t"), PendingPrefix("q", "t"), RunningPrefix("q", "t"), DeadPrefix("q", "t"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 1; i < len(c.keys); i++ {
				if bytes.Compare(c.keys[i-1], c.keys[i]) >= 0 {
					t.Errorf("key %d %q not below key %d %q", i-1, c.keys[i-1], i, c.keys[i])
				}
			}
		})
	}
}

// Test_TimeKeyClampsNegative: a negative time sorts as zero instead of
// after every positive time.
func Test_TimeKeyClampsNegative(t *testing.T) {
	if got := TimeKey(-5); got != 0 {
		t.Fatalf("TimeKey(-5) = %d, want 0", got)
	}
	if !bytes.Equal(LeaseKey(-1, "a"), LeaseKey(0, "a")) {
		t.Fatal("negative lease time did not clamp to 0")
	}
}

// Test_PrefixesAreDisjoint: no queue's or tenant's prefix covers another's,
// which is why names may not contain '/'.
func Test_PrefixesAreDisjoint(t *testing.T) {
	refs := []struct{ q, t string }{{"a", "b"}, {"a", "bc"}, {"ab", "c"}, {"a", "b.c"}, {"a-b", "c"}, {"b", "a"}}
	for _, x := range refs {
		for _, y := range refs {
			if x == y {
				continue
			}
			checks := []struct {
				name string
				p, k []byte
			}{
				{"queue", QueuePrefix(x.q, x.t), PendingKey(y.q, y.t, 1, 1, "id")},
				{"catalog", CatalogPrefix(x.q), CatalogKey(y.q, y.t)},
				{"idem", IdemKey(x.q, x.t, ""), IdemKey(y.q, y.t, "k")},
			}
			for _, c := range checks {
				if bytes.HasPrefix(c.k, c.p) && (c.name != "catalog" || x.q != y.q) {
					t.Errorf("%s prefix of %v covers key %q of %v", c.name, x, c.k, y)
				}
			}
		}
		// Every index key of a queue lies inside its prefix range.
		p := QueuePrefix(x.q, x.t)
		for _, k := range [][]byte{
			PendingKey(x.q, x.t, 0, math.MaxUint64, "\xff\xff"), PendingKey(x.q, x.t, 9, 0, ""),
			DelayedKey(x.q, x.t, math.MaxInt64, "id"), RunningKey(x.q, x.t, "id"), DeadKey(x.q, x.t, "id"),
		} {
			if bytes.Compare(k, p) < 0 || bytes.Compare(k, PrefixEnd(p)) >= 0 {
				t.Errorf("key %q outside [%q, %q)", k, p, PrefixEnd(p))
			}
		}
	}
}

func Test_PrefixEnd(t *testing.T) {
	cases := []struct {
		in, want []byte
	}{
		{[]byte("abc"), []byte("abd")},
		{[]byte("q/"), []byte("q0")},
		{[]byte("ab\xff"), []byte("ac")},
		{[]byte("a\xff\xff"), []byte("b")},
		{[]byte("\xff\xff"), nil},
		{[]byte{}, nil},
		{nil, nil},
	}
	for _, c := range cases {
		in := append([]byte(nil), c.in...)
		got := PrefixEnd(c.in)
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
		if !bytes.Equal(in, c.in) {
			t.Errorf("PrefixEnd(%q) modified its input", in)
		}
		if got != nil && (bytes.Compare(got, c.in) <= 0 || bytes.HasPrefix(got, c.in)) {
			t.Errorf("PrefixEnd(%q) = %q is not past the prefix", c.in, got)
		}
	}
}

func Test_ParsePendingKeyRoundTrip(t *testing.T) {
	for _, prio := range []uint32{0, 4, 9} {
		for _, seq := range []uint64{0, 1, 255, 1 << 16, 1<<48 | 7, math.MaxUint64} {
			for _, id := range []string{"", "a", "000000000000002a0003", "with/slash", "\xff\x00"} {
				prefix := PendingPrioPrefix("orders", "acme", prio)
				k := PendingKey("orders", "acme", prio, seq, id)
				gotSeq, gotID, err := ParsePendingKey(k, len(prefix))
				if err != nil || gotSeq != seq || gotID != id {
					t.Errorf("ParsePendingKey(prio %d seq %d id %q) = %d, %q, %v", prio, seq, id, gotSeq, gotID, err)
				}
			}
		}
	}
	prefix := PendingPrioPrefix("q", "t", 1)
	bad := map[string][]byte{
		"short":       append(append([]byte{}, prefix...), 0, 0, 0, 1),
		"no slash":    append(PutUint64(append([]byte{}, prefix...), 5), 'x', 'a'),
		"empty":       nil,
		"prefix only": prefix,
	}
	for name, k := range bad {
		if _, _, err := ParsePendingKey(k, len(prefix)); err == nil {
			t.Errorf("%s: ParsePendingKey(%q) accepted a malformed key", name, k)
		}
	}
}

func Test_TimeIndexKeyRoundTrip(t *testing.T) {
	for _, at := range []int64{0, 1, 1 << 40, math.MaxInt64} {
		for _, id := range []string{"", "x", "0000000000000001000a"} {
			for _, k := range [][]byte{LeaseKey(at, id), WakeKey(at, id), ExpireKey(at, id)} {
				gotAt, gotID, err := parseTimeIndexKey(k, 2)
				if err != nil || gotAt != at || gotID != id {
					t.Errorf("parseTimeIndexKey(%q) = %d, %q, %v; want %d, %q", k, gotAt, gotID, err, at, id)
				}
			}
		}
	}
	if _, _, err := parseTimeIndexKey([]byte("l/1234"), 2); err == nil {
		t.Error("short time index key accepted")
	}
}

// Test_TimeIndexUpperBound: the bound of "time <= t" takes every id at t,
// even one of 0xff bytes, and nothing at t+1.
func Test_TimeIndexUpperBound(t *testing.T) {
	for _, at := range []int64{0, 5, math.MaxInt64} {
		upper := timeIndexUpper(prefixLease, at)
		if k := LeaseKey(at, "\xff\xff\xff"); bytes.Compare(k, upper) >= 0 {
			t.Errorf("t=%d: key %q not below bound %q", at, k, upper)
		}
		if at < math.MaxInt64 {
			if k := LeaseKey(at+1, ""); bytes.Compare(k, upper) < 0 {
				t.Errorf("t=%d: key of t+1 %q below bound %q", at, k, upper)
			}
		}
		if bytes.Compare(upper, PrefixEnd(prefixLease)) > 0 {
			t.Errorf("t=%d: bound %q leaves the l/ prefix", at, upper)
		}
	}
}

func Test_CatalogKeyRoundTrip(t *testing.T) {
	for _, c := range []struct{ q, t string }{{"q", "t"}, {"orders.v2", "acme-eu"}, {"a", "b_c"}} {
		q, tn, err := ParseCatalogKey(CatalogKey(c.q, c.t))
		if err != nil || q != c.q || tn != c.t {
			t.Errorf("ParseCatalogKey(CatalogKey(%q, %q)) = %q, %q, %v", c.q, c.t, q, tn, err)
		}
	}
	for _, k := range []string{"x/q/t", "c/notenant", ""} {
		if _, _, err := ParseCatalogKey([]byte(k)); err == nil {
			t.Errorf("ParseCatalogKey(%q) accepted a malformed key", k)
		}
	}
}
