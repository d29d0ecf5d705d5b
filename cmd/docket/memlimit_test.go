package main

import "testing"

// Test_ParseBytes: --memory-limit takes bytes or binary units, and says
// what it wants when it gets something else.
func Test_ParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "64KiB": 64 << 10, "512MiB": 512 << 20, "2 GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "512MB", "1.5GiB", "-1", "GiB", "99999999999TiB"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}
