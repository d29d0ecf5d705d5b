package membership

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scenarios")

// t0 is the scenarios' epoch; the leader's now is t0+1h.
var t0 = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

func addr(i string) string { return "10.0.0." + i + ":7501" }

// scenario is one block of a testdata file: commands, then the expected
// output below "----".
type scenario struct {
	name string
	cmds []string
	want string
	line int
}

// readScenarios splits a testdata file into its blocks.
func readScenarios(t *testing.T, path string) (header string, out []scenario) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	line := 1
	for _, blk := range blocks {
		start := line
		line += strings.Count(blk, "\n") + 2
		if !strings.Contains(blk, "\n----\n") {
			header += blk + "\n\n"
			continue
		}
		cmds, want, _ := strings.Cut(blk, "\n----\n")
		s := scenario{want: want, line: start}
		for _, l := range strings.Split(cmds, "\n") {
			if name, ok := strings.CutPrefix(l, "# "); ok {
				s.name = name
				continue
			}
			s.cmds = append(s.cmds, l)
		}
		out = append(out, s)
	}
	return header, out
}

// run builds the scenario's Input and prints what Decide does with it.
func (s scenario) run(t *testing.T) (Input, string) {
	t.Helper()
	in := Input{Self: "n1", Members: map[string]gossip.Member{}, HealthySince: map[string]time.Time{},
		Now: t0.Add(time.Hour), Rules: Rules{DeadServerTimeout: time.Minute, Stabilization: 10 * time.Second, MinQuorum: 3, RemovedHold: time.Minute}}
	dur := func(v string) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("line %d: %v", s.line, err)
		}
		return d
	}
	num := func(v string) int {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("line %d: %v", s.line, err)
		}
		return n
	}
	kv := func(f string) string { _, v, _ := strings.Cut(f, "="); return v }
	for _, c := range s.cmds {
		f := strings.Fields(c)
		switch f[0] {
		case "world":
			voters, nonvoters := num(kv(f[1])), num(kv(f[2]))
			for i := 1; i <= voters+nonvoters; i++ {
				id, suf := fmt.Sprintf("n%d", i), raft.Voter
				if i > voters {
					suf = raft.Nonvoter
				}
				in.Servers = append(in.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr(strconv.Itoa(i))), Suffrage: suf})
				in.Members[id] = gossip.Member{Meta: gossip.Meta{ID: id, RaftAddr: addr(strconv.Itoa(i))}, Status: gossip.StatusAlive, Since: t0}
			}
		case "member":
			st := map[string]gossip.Status{"alive": gossip.StatusAlive, "failed": gossip.StatusFailed, "left": gossip.StatusLeft}[f[3]]
			since := t0
			if kv(f[4]) == "t0+1h" {
				since = t0.Add(time.Hour)
			}
			in.Members[f[1]] = gossip.Member{Meta: gossip.Meta{ID: f[1], RaftAddr: addr(kv(f[2]))}, Status: st, Since: since}
		case "failed", "left":
			for _, id := range f[2-b2i(f[0] == "left"):] {
				m := in.Members[id]
				if f[0] == "left" {
					m.Status, m.Since = gossip.StatusLeft, in.Now
				} else {
					m.Status, m.Since = gossip.StatusFailed, in.Now.Add(-dur(f[1]))
				}
				in.Members[id] = m
			}
		case "absent":
			for _, id := range f[1:] {
				delete(in.Members, id)
			}
		case "healthy":
			for _, id := range f[2:] {
				in.HealthySince[id] = in.Now.Add(-dur(f[1]))
			}
		case "removed":
			if in.Removed == nil {
				in.Removed = map[string]time.Time{}
			}
			in.Removed[f[2]] = in.Now.Add(-dur(f[1]))
		case "min-quorum":
			in.Rules.MinQuorum = num(f[1])
		case "enabled":
			in.Enabled = uint32(num(f[1]))
		case "decide":
		default:
			t.Fatalf("line %d: unknown command %q", s.line, c)
		}
	}
	var lines []string
	acts := Decide(in)
	for _, kind := range []ActionKind{AddNonvoter, Promote, Remove} {
		for _, a := range acts {
			if a.Kind == kind {
				lines = append(lines, map[ActionKind]string{AddNonvoter: "add", Promote: "promote", Remove: "remove"}[kind]+" "+a.ID)
			}
		}
	}
	if len(lines) == 0 {
		return in, "none"
	}
	return in, strings.Join(lines, "\n")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Test_Decide runs testdata/decide.txt. Beside each expected answer it
// checks the invariant behind them all: no round removes more than
// (voters-1)/2 voters.
func Test_Decide(t *testing.T) {
	const path = "testdata/decide.txt"
	header, scenarios := readScenarios(t, path)
	var rewritten []string
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			in, got := s.run(t)
			if *update {
				s.want = got
			} else if got != s.want {
				t.Fatalf("%s:%d: got\n%s\nwant\n%s", path, s.line, got, s.want)
			}
			voters, removed := 0, 0
			for _, srv := range in.Servers {
				if srv.Suffrage != raft.Voter {
					continue
				}
				voters++
				if strings.Contains("\n"+got+"\n", "\nremove "+string(srv.ID)+"\n") {
					removed++
				}
			}
			if removed > (voters-1)/2 {
				t.Fatalf("removed %d of %d voters in one round", removed, voters)
			}
		})
		rewritten = append(rewritten, "# "+s.name+"\n"+strings.Join(s.cmds, "\n")+"\n----\n"+s.want)
	}
	if *update {
		if err := os.WriteFile(path, []byte(header+strings.Join(rewritten, "\n\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
