package storage

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Test_ScanEachReadsEachRangeWhole: every range's Fn sees exactly its own
// keys, in order, and a failing range's error comes back while the other
// range still ends, named by the scan it came from.
func Test_ScanEachReadsEachRangeWhole(t *testing.T) {
	db := mustOpenDB(t)
	mustCommit(t, db, func(b *pebble.Batch) error {
		for i := range 500 {
			for _, p := range []string{"a/", "b/", "c/"} {
				if err := b.Set(fmt.Appendf(nil, "%s%04d", p, i), []byte(p), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// One list per range: each Fn runs on its own goroutine.
	seen := map[string]*[]string{"a/": new([]string), "b/": new([]string), "c/": new([]string)}
	scan := func(p string, fail bool) RangeScan {
		keys := seen[p]
		return RangeScan{What: "scan " + p, Lower: []byte(p), Upper: PrefixEnd([]byte(p)), Fn: func(k, v []byte) error {
			if string(v) != p {
				return fmt.Errorf("range %s met %q", p, k)
			}
			*keys = append(*keys, string(k))
			if fail && len(*keys) == 10 {
				return errors.New("planted")
			}
			return nil
		}}
	}
	if err := ScanEach(Wrap(db), scan("a/", false), scan("c/", false)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/", "c/"} {
		if keys := *seen[p]; len(keys) != 500 || keys[0] != p+"0000" || keys[499] != p+"0499" {
			t.Fatalf("range %s: %d keys, first %q", p, len(keys), keys[0])
		}
	}
	if len(*seen["b/"]) != 0 {
		t.Fatalf("no scan asked for b/, yet it was read")
	}
	for _, keys := range seen {
		*keys = nil
	}
	err := ScanEach(Wrap(db), scan("a/", true), scan("b/", false))
	if err == nil || err.Error() != "scan a/: planted" {
		t.Fatalf("ScanEach = %v, want the planted error named by its scan", err)
	}
	if len(*seen["b/"]) != 500 {
		t.Fatalf("the other range read %d keys, want 500", len(*seen["b/"]))
	}
}
