package raftlog

import (
	"testing"
)

func Test_LogSizes(t *testing.T) {
	type op struct {
		add    []uint64 // indexes added, 10 bytes each
		delLo  uint64
		delHi  uint64
		bytes  uint64
		within uint64 // newestWithin(25)
	}
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{"appends", []op{{add: []uint64{1, 2, 3}, bytes: 30, within: 2}}},
		{"compaction drops a prefix", []op{
			{add: []uint64{1, 2, 3, 4, 5}, bytes: 50, within: 2},
			{delLo: 1, delHi: 3, bytes: 20, within: 2},
		}},
		{"compaction past the end empties", []op{
			{add: []uint64{1, 2, 3}, bytes: 30},
			{delLo: 1, delHi: 9, bytes: 0},
			{add: []uint64{10}, bytes: 10, within: 1},
		}},
		{"a conflicting suffix is replaced", []op{
			{add: []uint64{1, 2, 3, 4}, bytes: 40},
			{add: []uint64{3}, bytes: 30},
		}},
		{"a suffix delete", []op{
			{add: []uint64{1, 2, 3, 4}, bytes: 40},
			{delLo: 3, delHi: 4, bytes: 20},
			{delLo: 7, delHi: 9, bytes: 20},
		}},
		{"a gap detaches the entries below it until compacted", []op{
			{add: []uint64{1, 2, 3}, bytes: 30},
			{add: []uint64{100, 101}, bytes: 50, within: 2},
			{delLo: 1, delHi: 2, bytes: 50},
			{delLo: 1, delHi: 99, bytes: 20},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sizes
			for i, o := range tc.ops {
				for _, ix := range o.add {
					s.add(ix, 10)
				}
				if o.delHi > 0 {
					s.deleteRange(o.delLo, o.delHi)
				}
				if got := s.Bytes(); got != o.bytes {
					t.Fatalf("step %d: %d bytes, want %d", i, got, o.bytes)
				}
				if o.within > 0 {
					if got := s.NewestWithin(25); got != o.within {
						t.Fatalf("step %d: %d entries within 25 bytes, want %d", i, got, o.within)
					}
				}
			}
		})
	}
}
