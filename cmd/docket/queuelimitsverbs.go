package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// queueLimit is `docket queue limit QUEUE [--concurrency N] [--rate R/s]
// [--burst B] [--clear]`, or with --tenant-wide and no QUEUE the
// tenant's concurrency limit across its queues. A flag not given keeps
// its limit; 0 clears it.
func (v *verb) queueLimit(ctx context.Context, pos []string, f *limitFlags) error {
	const what = "limit QUEUE [--concurrency N] [--rate R/s] [--burst B] [--clear] | limit --tenant-wide --concurrency N"
	concurrency, rate, burst, clearAll, tenantWide := f.concurrency, f.rate, f.burst, f.clear, f.tenantWide
	var err error
	if *tenantWide != (len(pos) == 0) || *tenantWide && (flagSet(v.fs, "rate") || flagSet(v.fs, "burst") || *clearAll || f.fair.any()) {
		return fmt.Errorf("%w: docket queue %s", errUsage, what)
	}
	var l client.QueueLimits
	if flagSet(v.fs, "concurrency") || *clearAll {
		if *concurrency > math.MaxUint32 {
			return fmt.Errorf("%w: --concurrency %d is too large", errUsage, *concurrency)
		}
		l.MaxRunning = ptr(uint32(*concurrency))
	}
	if flagSet(v.fs, "rate") || *clearAll {
		milli := uint64(0)
		if !*clearAll {
			if milli, err = parseRate(*rate); err != nil {
				return fmt.Errorf("%w: --rate: %v", errUsage, err)
			}
		}
		l.RateMilli = &milli
	}
	if flagSet(v.fs, "burst") {
		if *burst > math.MaxUint32 {
			return fmt.Errorf("%w: --burst %d is too large", errUsage, *burst)
		}
		l.Burst = ptr(uint32(*burst))
	}
	if err := f.fair.apply(&l); err != nil { // fairverbs.go
		return err
	}
	if l.MaxRunning == nil && l.RateMilli == nil && l.Burst == nil && !f.fair.any() {
		return fmt.Errorf("%w: docket queue %s: give a limit", errUsage, what)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		var changed bool
		if *tenantWide {
			changed, err = c.SetTenantLimit(ctx, v.c.tenant, *l.MaxRunning)
		} else {
			changed, err = c.SetQueueLimits(ctx, pos[0], v.c.tenant, l)
		}
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			name := "tenant " + v.c.tenant
			if !*tenantWide {
				name = pos[0] + "/" + v.c.tenant
			}
			if !changed {
				fmt.Fprintf(w, "%s: limits unchanged\n", name)
				return
			}
			var parts []string
			if l.MaxRunning != nil {
				parts = append(parts, "concurrency "+orNone(uint64(*l.MaxRunning), strconv.FormatUint(uint64(*l.MaxRunning), 10)))
			}
			if l.RateMilli != nil {
				parts = append(parts, "rate "+orNone(*l.RateMilli, formatRate(*l.RateMilli)))
			}
			if l.Burst != nil {
				parts = append(parts, "burst "+orNone(uint64(*l.Burst), strconv.FormatUint(uint64(*l.Burst), 10)))
			}
			parts = append(parts, fairLimitsText(l)...)
			fmt.Fprintf(w, "%s: %s\n", name, strings.Join(parts, ", "))
		}, &pb.SetQueueLimitsResponse{Changed: changed})
	})
}

// limitFlags are the flags of `docket queue limit`, defined on the queue
// verb's flag set before it parses.
type limitFlags struct {
	v                 *verb
	concurrency       *uint
	rate              *string
	burst             *uint
	clear, tenantWide *bool
	fair              *fairLimitFlags // fairverbs.go: the per-key flags
}

func (v *verb) limitFlags() *limitFlags {
	return &limitFlags{
		v:           v,
		concurrency: v.fs.Uint("concurrency", 0, "limit: at most this many RUNNING tasks of the queue (0: no limit)"),
		rate:        v.fs.String("rate", "", "limit: at most this many claimed tasks per second, minute or hour: 5/s, 0.5/s, 30/m, 100/h (0: no limit)"),
		burst:       v.fs.Uint("burst", 0, "limit: the rate's bucket size, tasks a claim may take at once after a lull (0: the rate per second, at least 1)"),
		clear:       v.fs.Bool("clear", false, "limit: clear the queue's concurrency and rate limits"),
		tenantWide:  v.fs.Bool("tenant-wide", false, "limit: set the tenant's concurrency limit across all its queues (needs admin over every tenant)"),
		fair:        newFairLimitFlags(v.fs),
	}
}

// any reports whether a limit flag was given, which only `limit` takes.
func (f *limitFlags) any() bool {
	for _, n := range append([]string{"concurrency", "rate", "burst", "clear", "tenant-wide"}, fairLimitNames...) {
		if flagSet(f.v.fs, n) {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func orNone(v uint64, s string) string {
	if v == 0 {
		return "none"
	}
	return s
}

// parseRate reads N/s, N/m or N/h (N a decimal; a bare N is per second)
// as tasks per 1000 seconds, the API's unit.
func parseRate(s string) (uint64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	per := map[string]float64{"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
	if per == 0 {
		return 0, fmt.Errorf("%q: the unit is /s, /m or /h", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a rate like 5/s", s)
	}
	milli := math.Round(v * 1000 / per)
	if v > 0 && milli < 1 {
		return 0, fmt.Errorf("%q is below the least rate, 1 per 1000 s", s)
	}
	if milli > 1e9 {
		return 0, fmt.Errorf("%q is over a million a second", s)
	}
	return uint64(milli), nil
}

// formatRate shows tasks per 1000 s as a rate per second.
func formatRate(milli uint64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) + "/s"
}

// limitsText is what `docket stats` and `docket queues` show of a queue's
// limits: "" when it has none.
func limitsText(s *pb.QueueStats) string {
	var parts []string
	if m := s.GetMaxRunning(); m > 0 {
		parts = append(parts, fmt.Sprintf("running %d/%d", s.GetRunning(), m))
	}
	if r := s.GetRateMilli(); r > 0 {
		parts = append(parts, fmt.Sprintf("rate %s tokens %s/%d", formatRate(r),
			strconv.FormatFloat(float64(s.GetTokensMilli())/1000, 'f', -1, 64), s.GetBurst()))
	}
	if m := s.GetTenantMaxRunning(); m > 0 {
		parts = append(parts, fmt.Sprintf("tenant running %d/%d", s.GetTenantRunning(), m))
	}
	return strings.Join(parts, ", ")
}
