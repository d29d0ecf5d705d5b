package client

import (
	"encoding/hex"
	"strconv"
	"testing"
	"time"
)

// The keys Enqueue mints must rise with time, so the cluster appends them to
// its idempotency index instead of scattering them, and must still never
// repeat within one millisecond.
func Test_MintedKeysSortByTimeAndNeverRepeat(t *testing.T) {
	start := time.UnixMilli(1_790_000_000_000)
	seen := map[string]bool{}
	prevMax := ""
	for ms := 0; ms < 50; ms++ {
		at := start.Add(time.Duration(ms) * time.Millisecond)
		lo, hi := "", ""
		for range 200 {
			k := newKeyAt(at)
			if len(k) != 32 {
				t.Fatalf("key %q: %d digits, want 32", k, len(k))
			}
			if _, err := hex.DecodeString(k); err != nil {
				t.Fatalf("key %q is not hex: %v", k, err)
			}
			if seen[k] {
				t.Fatalf("key %q minted twice", k)
			}
			seen[k] = true
			if lo == "" || k < lo {
				lo = k
			}
			if k > hi {
				hi = k
			}
		}
		if lo <= prevMax {
			t.Fatalf("a key of millisecond %d (%s) sorts at or before one of an earlier millisecond (%s)", ms, lo, prevMax)
		}
		prevMax = hi
	}
}

// A minted key is a UUIDv7 by RFC 9562: the time in its first 48 bits,
// version 7, variant 10, so tools that read UUIDs read its time.
func Test_MintedKeyIsAUUIDv7(t *testing.T) {
	at := time.UnixMilli(0x0190_1234_5678)
	k := newKeyAt(at)
	ms, err := strconv.ParseUint(k[:12], 16, 64)
	if err != nil || ms != uint64(at.UnixMilli()) {
		t.Fatalf("key %s: time %x (%v), want %x", k, ms, err, at.UnixMilli())
	}
	if k[12] != '7' {
		t.Fatalf("key %s: version %c, want 7", k, k[12])
	}
	if v := k[16]; v != '8' && v != '9' && v != 'a' && v != 'b' {
		t.Fatalf("key %s: variant digit %c, want 8..b", k, v)
	}
}
