package fsm

import (
	"slices"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// rfc parses an RFC 3339 time into Unix ns.
func rfc(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixNano()
}

// Test_CronSpecNext is the table of the slot function: (spec, zone, after)
// -> the next slots, including both DST changes of Europe/Berlin in 2026
// (29 March 02:00 CET -> 03:00 CEST; 25 October 03:00 CEST -> 02:00 CET).
func Test_CronSpecNext(t *testing.T) {
	cases := []struct {
		name, spec, zone, after string
		want                    []string // the next len(want) slots, RFC 3339
	}{
		{"every 5 minutes UTC", "*/5 * * * *", "", "2026-01-01T00:02:10Z",
			[]string{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"}},
		{"a slot itself is not after itself", "0 * * * *", "UTC", "2026-01-01T10:00:00Z",
			[]string{"2026-01-01T11:00:00Z"}},
		{"@hourly", "@hourly", "", "2026-01-01T10:59:59Z",
			[]string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"@every counts from the epoch", "@every 90s", "", "2026-01-01T00:00:01Z",
			[]string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"}},
		{"@every ignores the zone", "@every 1h", "Asia/Kolkata", "2026-01-01T00:10:00Z",
			[]string{"2026-01-01T01:00:00Z"}},
		{"zone: 9:00 in Tokyo", "0 9 * * *", "Asia/Tokyo", "2025-12-31T12:00:00Z",
			[]string{"2026-01-01T09:00:00+09:00", "2026-01-02T09:00:00+09:00"}},
		{"spring forward: 02:30 does not exist and is skipped", "30 2 * * *", "Europe/Berlin", "2026-03-28T03:00:00+01:00",
			[]string{"2026-03-30T02:30:00+02:00"}},
		{"spring forward: hourly loses 02:00", "0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"fall back: 02:30 happens twice, two slots", "30 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"}},
		{"fall back: daily 09:00 keeps its wall time", "0 9 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T09:00:00+01:00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := ParseCronSpec(c.spec, c.zone)
			if err != nil {
				t.Fatal(err)
			}
			s := rfc(t, c.after)
			for i, w := range c.want {
				s = spec.Next(s)
				if want := rfc(t, w); s != want {
					t.Fatalf("slot %d: %s, want %s", i, time.Unix(0, s).UTC().Format(time.RFC3339), time.Unix(0, want).UTC().Format(time.RFC3339))
				}
				if !spec.IsSlot(s) || spec.IsSlot(s+1) || spec.IsSlot(s-int64(time.Second)) && c.spec != "@every 1s" {
					t.Fatalf("IsSlot around %d wrong", s)
				}
			}
		})
	}
}

func Test_CronSpecParseErrors(t *testing.T) {
	for _, c := range []struct{ spec, zone string }{
		{"", ""},
		{"* * * *", ""},       // four fields
		{"0 0 * * * *", ""},   // six: seconds are not standard
		{"61 * * * *", ""},    // minute out of range
		{"@every 500ms", ""},  // under a second
		{"@every 1500ms", ""}, // not whole seconds
		{"@every 400d", ""},   // not a duration
		{"@every 9000h", ""},  // over MaxDelay
		{"CRON_TZ=UTC 0 * * * *", ""},
		{"0 * * * *", "Mars/Olympus"},
		{"0 * * * *", "Local"}, // the host's zone would differ per node
		{"@reboot", ""},
	} {
		if _, err := ParseCronSpec(c.spec, c.zone); err == nil {
			t.Errorf("%q in %q parsed", c.spec, c.zone)
		}
	}
}

// Test_CronSpecNewest checks the due-slot choice: the newest n in
// (after, now], oldest first, for sparse and dense specs and long gaps.
func Test_CronSpecNewest(t *testing.T) {
	min := int64(time.Minute)
	base := rfc(t, "2026-01-01T00:00:00Z")
	cases := []struct {
		name       string
		spec       string
		after, now int64
		n          int
		want       []int64
	}{
		{"none due", "*/5 * * * *", base, base + 4*min, 3, nil},
		{"now on a slot", "*/5 * * * *", base, base + 5*min, 3, []int64{base + 5*min}},
		{"newest of many", "* * * * *", base, base + 600*min + 30, 1, []int64{base + 600*min}},
		{"catch up three", "* * * * *", base, base + 10*min, 3, []int64{base + 8*min, base + 9*min, base + 10*min}},
		{"fewer than n", "*/5 * * * *", base, base + 12*min, 5, []int64{base + 5*min, base + 10*min}},
		{"a year's gap, monthly", "0 0 1 * *", base, base + 365*24*60*min, 2,
			[]int64{rfc(t, "2026-12-01T00:00:00Z"), rfc(t, "2027-01-01T00:00:00Z")}},
		{"a gap since the epoch, yearly", "0 0 1 1 *", 1, rfc(t, "2026-06-01T00:00:00Z"), 2,
			[]int64{rfc(t, "2025-01-01T00:00:00Z"), rfc(t, "2026-01-01T00:00:00Z")}},
		{"now at MaxTime, sparse", "0 0 1 1 *", 1, MaxTime, 2,
			[]int64{rfc(t, "2199-01-01T00:00:00Z"), rfc(t, "2200-01-01T00:00:00Z")}},
		{"@every", "@every 1s", base, base + 10*int64(time.Second) + 5, 2,
			[]int64{base + 9*int64(time.Second), base + 10*int64(time.Second)}},
		{"@every after floor", "@every 1s", base + 9*int64(time.Second), base + 10*int64(time.Second), 5,
			[]int64{base + 10*int64(time.Second)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := ParseCronSpec(c.spec, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.Newest(c.after, c.now, c.n); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func Test_DueSlotsPolicy(t *testing.T) {
	sec := int64(time.Second)
	base := rfc(t, "2026-01-01T00:00:00Z")
	s := &pb.Schedule{Spec: "@every 1s", LastSlot: base, UpdatedAt: base - 100*sec}
	if got, _ := DueSlots(s, base+10*sec); !slices.Equal(got, []int64{base + 10*sec}) {
		t.Fatalf("skip: %v", got)
	}
	s.Missed, s.CatchupMax = pb.MissedPolicy_MISSED_POLICY_CATCH_UP, 4
	if got, _ := DueSlots(s, base+10*sec); !slices.Equal(got, []int64{base + 7*sec, base + 8*sec, base + 9*sec, base + 10*sec}) {
		t.Fatalf("catch up 4: %v", got)
	}
	s.UpdatedAt = base + 8*sec // nothing at or before the last change
	if got, _ := DueSlots(s, base+10*sec); !slices.Equal(got, []int64{base + 9*sec, base + 10*sec}) {
		t.Fatalf("after update: %v", got)
	}
}
