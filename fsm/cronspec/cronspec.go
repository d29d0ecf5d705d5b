// Package cronspec parses a schedule's spec into its slots: a pure
// function from (spec, zone, a time) to the next slot, the same on every
// replica, over a time zone database embedded in the build. The FSM's
// schedule rules use it; so do the CLI and the dashboard, to show the
// next runs the FSM will accept.
package cronspec

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Slots of a schedule are a pure function from (spec, zone, a time) to the
// next slot, the same on every replica. That needs two things a plain
// cron library call does not give:
//
//   - The time zone database is this build's own: tzdata/zoneinfo.zip
//     (IANA 2025c, copied from Go's lib/time), embedded. time.LoadLocation
//     prefers the host's /usr/share/zoneinfo (and $ZONEINFO) over the
//     embedded time/tzdata, so two nodes with different host packages
//     could disagree on a slot in a zone whose rules changed, and one would
//     refuse a FIRE another applies. Replacing the file changes what apply
//     decides, so it goes with a new feature level.
//   - robfig/cron's parser gives a spec time.Local when it names no zone,
//     and its Next then follows the caller's zone; the zone is set here
//     explicitly. @every counts from the Unix epoch, not from "now", so
//     that whether a time is a slot does not depend on when it is asked.

//go:embed tzdata/zoneinfo.zip
var zoneinfoZip []byte

// TZDataVersion names the IANA release of the embedded zone database.
const TZDataVersion = "2025c"

var zones struct {
	once  sync.Once
	files map[string]*zip.File
	err   error
	mu    sync.Mutex
	locs  map[string]*time.Location
}

// LoadZone is the named IANA zone from the embedded database; "" and
// "UTC" are UTC. "Local" and host files are never consulted.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	zones.once.Do(func() {
		r, err := zip.NewReader(bytes.NewReader(zoneinfoZip), int64(len(zoneinfoZip)))
		if err != nil {
			zones.err = fmt.Errorf("embedded zone database: %w", err)
			return
		}
		zones.files = make(map[string]*zip.File, len(r.File))
		for _, f := range r.File {
			zones.files[f.Name] = f
		}
		zones.locs = map[string]*time.Location{}
	})
	if zones.err != nil {
		return nil, zones.err
	}
	zones.mu.Lock()
	defer zones.mu.Unlock()
	if loc, ok := zones.locs[name]; ok {
		return loc, nil
	}
	f, ok := zones.files[name]
	if !ok {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	zones.locs[name] = loc
	return loc, nil
}

// Spec is a parsed schedule spec in its zone.
type Spec struct {
	every   int64              // @every: the period in ns; slots are its multiples since the epoch
	spec    *cron.SpecSchedule // otherwise
	maxTime int64              // Bounds.MaxTime
}

// Bounds are the limits a spec must keep.
type Bounds struct {
	MaxLen   int           // bytes of the spec
	MaxEvery time.Duration // the longest @every
	MaxTime  int64         // the latest slot, Unix ns
}

// Parse parses a standard 5-field cron spec or a descriptor (@hourly,
// @every 90s, ...) in the IANA zone ("" is UTC), within b. The error
// says what is wrong, for people.
func Parse(spec, zone string, b Bounds) (Spec, error) {
	if len(spec) == 0 || len(spec) > b.MaxLen {
		return Spec{}, fmt.Errorf("length %d not in 1..%d", len(spec), b.MaxLen)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Spec{}, fmt.Errorf("give the time zone as the schedule's zone, not in the spec")
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return Spec{}, err
	}
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Spec{}, fmt.Errorf("@every: %w", err)
		}
		if d < time.Second || d%time.Second != 0 || d > b.MaxEvery {
			return Spec{}, fmt.Errorf("@every %v: want whole seconds in 1s..%v", d, b.MaxEvery)
		}
		return Spec{every: int64(d), maxTime: b.MaxTime}, nil
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return Spec{}, err
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, fmt.Errorf("unsupported spec %q", spec)
	}
	c := *ss
	c.Location = loc
	return Spec{spec: &c, maxTime: b.MaxTime}, nil
}

// Next is the first slot strictly after after (Unix ns), or 0 when there
// is none before Bounds.MaxTime (or, for a cron spec, within the five years
// robfig/cron searches).
func (c Spec) Next(after int64) int64 {
	if after < 0 {
		after = -1
	}
	var n int64
	if c.every > 0 {
		n = (after/c.every + 1) * c.every
		if after < 0 {
			n = 0
		}
	} else {
		t := c.spec.Next(time.Unix(0, after).In(c.spec.Location))
		if t.IsZero() {
			return 0
		}
		n = t.UnixNano()
	}
	if n <= after || n > c.maxTime {
		return 0
	}
	return n
}

// IsSlot reports whether t is one of the spec's slots.
func (c Spec) IsSlot(t int64) bool { return t > 0 && c.Next(t-1) == t }

// Newest is the newest n slots in (after, now], oldest first.
func (c Spec) Newest(after, now int64, n int) []int64 {
	if n <= 0 || now <= after {
		return nil
	}
	if first := c.Next(after); first == 0 || first > now {
		return nil
	}
	if c.every > 0 {
		var out []int64
		for s := now - now%c.every; s > after && s > 0 && len(out) < n; s -= c.every {
			out = append(out, s)
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	// No Prev in robfig/cron: walk forward from ever earlier starts
	// until the window holds n slots or reaches after. The work is about
	// the slots of the last window, whatever the gap since after.
	ring := make([]int64, 0, n)
	span := now - after
	for w := min(int64(time.Minute), span); ; {
		start := now - w // after, once w reaches span
		ring = ring[:0]
		for s := c.Next(start); s != 0 && s <= now; s = c.Next(s) {
			if len(ring) == n {
				copy(ring, ring[1:])
				ring = ring[:n-1]
			}
			ring = append(ring, s)
		}
		if len(ring) == n || start == after {
			return ring
		}
		if w > span/4 {
			w = span // also keeps w*4 from wrapping
		} else {
			w *= 4
		}
	}
}
