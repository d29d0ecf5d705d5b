package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Corruption targets: the kinds of file the corrupt-disk fault damages.
const (
	KindRaftDB   = "raft.db"  // the Raft log and stable store (bbolt)
	KindManifest = "manifest" // Pebble's MANIFEST
	KindSST      = "sst"      // a Pebble table
	KindWAL      = "wal"      // Pebble's write-ahead log (only builds before it was turned off)
	KindBlob     = "blob"     // a Pebble blob file: task bodies of 1 KiB and more
	// KindWALSegment is a raft-wal segment (the default log store): the
	// active one takes appends, the sealed ones never change again.
	KindWALSegment = "wal-segment"
	// KindWALMeta is raft-wal's meta file (BoltDB): the segment list and
	// Raft's term and vote.
	KindWALMeta = "wal-meta"
)

// liveKinds are the kinds the fault may also damage under a running node:
// files written once (a blob file, a sealed segment) or only appended (the
// active segment), whose bytes on disk nothing rewrites, so that the
// damage waits there for the next read, the scrub or the check. The
// others are rewritten in place while the node runs and are damaged at
// rest only.
var liveKinds = map[string]bool{KindBlob: true, KindWALSegment: true}

// corruptCandidates lists, per kind, the files of a node's data directory
// that the corruption fault may damage. Pebble keeps its files in fsm/db/
// (fsm.Open's layout), raft-wal in raft-wal/ (cluster/raftlog).
func corruptCandidates(dataDir string) map[string][]string {
	out := map[string][]string{}
	if fi, err := os.Stat(filepath.Join(dataDir, "raft.db")); err == nil && fi.Size() > 0 {
		out[KindRaftDB] = []string{filepath.Join(dataDir, "raft.db")}
	}
	walDir := filepath.Join(dataDir, "raft-wal")
	wents, _ := os.ReadDir(walDir)
	for _, e := range wents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < 16 {
			continue
		}
		p := filepath.Join(walDir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".wal"):
			out[KindWALSegment] = append(out[KindWALSegment], p)
		case e.Name() == "wal-meta.db":
			out[KindWALMeta] = append(out[KindWALMeta], p)
		}
	}
	pebbleDir := filepath.Join(dataDir, "fsm", "db")
	ents, _ := os.ReadDir(pebbleDir)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < 16 {
			continue
		}
		p := filepath.Join(pebbleDir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "MANIFEST-"):
			out[KindManifest] = append(out[KindManifest], p)
		case strings.HasSuffix(e.Name(), ".sst"):
			out[KindSST] = append(out[KindSST], p)
		case strings.HasSuffix(e.Name(), ".log"):
			out[KindWAL] = append(out[KindWAL], p)
		case strings.HasSuffix(e.Name(), ".blob"):
			out[KindBlob] = append(out[KindBlob], p)
		}
	}
	return out
}

// flipBytes inverts width bytes at each of regions random, non-overlapping
// offsets of path (fewer if the file is small) and syncs it. Inverting (not
// randomising) guarantees every byte changes; overlapping regions would
// invert some bytes back.
func flipBytes(path string, r *rand.Rand, regions, width int) ([]int64, error) {
	return flipBytesIn(path, r, regions, width, -1)
}

// flipBytesIn is flipBytes within the file's first size bytes (all of it
// when size < 0).
func flipBytesIn(path string, r *rand.Rand, regions, width int, size int64) ([]int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	if size < 0 || size > fi.Size() {
		size = fi.Size()
	}
	if size < int64(width) {
		return nil, fmt.Errorf("corrupt %s: only %d bytes", path, size)
	}
	offs := make([]int64, 0, regions)
	buf := make([]byte, width)
	overlaps := func(off int64) bool {
		for _, o := range offs {
			if off < o+int64(width) && o < off+int64(width) {
				return true
			}
		}
		return false
	}
	for try := 0; len(offs) < regions && try < 100*regions; try++ {
		off := r.Int64N(size - int64(width) + 1)
		if overlaps(off) {
			continue
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return offs, fmt.Errorf("corrupt %s: %w", path, err)
		}
		for i := range buf {
			buf[i] ^= 0xff
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return offs, fmt.Errorf("corrupt %s: %w", path, err)
		}
		offs = append(offs, off)
	}
	sort.Slice(offs, func(a, b int) bool { return offs[a] < offs[b] })
	if err := f.Sync(); err != nil {
		return offs, fmt.Errorf("corrupt %s: %w", path, err)
	}
	return offs, nil
}

// Corruption outcomes, recorded on the window's stop event.
const (
	OutcomeServing  = "started and serving"
	OutcomeRepaired = "not serving at first, then serving (repaired itself)"
	OutcomeRefused  = "refused to start (exited); wiped and rejoined"
	OutcomeStuck    = "stayed NOT_SERVING; wiped and rejoined"
)

// corruptSettle is how long a corrupted node gets, after the window, to
// serve again before it is wiped.
const corruptSettle = 20 * time.Second

// corrupt flips bytes in one file of one node (a minority of any
// cluster): its raft.db or raft-wal segment or meta file, or Pebble's
// MANIFEST, a table, a blob file or the WAL. At rest (the node stopped,
// damaged, started) for every kind; for a blob file or a raft-wal
// segment, half the time under the running node instead, which then runs
// with the damage for the window (a read, the scrub or the check must
// find it, and nothing may serve it) and is restarted at the heal, so
// the checks at open meet it too. The heal waits for the node to serve;
// a node that exited or stays NOT_SERVING is repaired the documented way:
// its data directory is wiped and it restarts empty, rejoins through
// --join and catches up from the leader's snapshot and log.
func (m *Nemesis) corrupt(ctx context.Context) ([]int, healFunc, string, error) {
	c := m.C
	x := c.Nodes[m.Rand.IntN(len(c.Nodes))]
	live := m.Rand.IntN(2) == 0 && x.Running()
	cands := corruptCandidates(x.DataDir)
	if live {
		for k := range cands {
			if !liveKinds[k] {
				delete(cands, k)
			}
		}
		live = len(cands) > 0
	}
	if !live {
		c.Stop(x, 5*time.Second)
		cands = corruptCandidates(x.DataDir)
	}
	kinds := make([]string, 0, len(cands))
	for k := range cands {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	restart := plain(func(context.Context) error {
		c.Stop(x, 5*time.Second) // a no-op for a stopped node
		return c.Start(x)
	})
	if len(kinds) == 0 {
		return []int{x.I}, restart, "", fmt.Errorf("corrupt %s: no raft store or Pebble file in %s", x.ID, x.DataDir)
	}
	kind := kinds[m.Rand.IntN(len(kinds))]
	files := cands[kind]
	sort.Strings(files) // raft-wal's names sort by base index: the last is the active segment
	i := m.Rand.IntN(len(files))
	file := files[i]
	regions, width, extent, what := 4, 8, int64(-1), ""
	switch kind {
	case KindRaftDB: // mostly free pages: more flips to hit live data
		regions = 16
	case KindWALSegment:
		// A segment is preallocated and zero past its last append: flips
		// there would only look like a tail that was never written.
		extent, what = writtenExtent(file), " (sealed)"
		if i == len(files)-1 {
			what = " (active)"
		}
	}
	when := "at rest"
	if live {
		when = "while running"
	}
	offs, err := flipBytesIn(file, m.Rand, regions, width, extent)
	rel, _ := filepath.Rel(x.DataDir, file)
	detail := fmt.Sprintf("%s: %s %s%s %s, %d bytes inverted at offsets %v", x.ID, kind, rel, what, when, width, offs)
	if err != nil {
		return []int{x.I}, restart, detail, err
	}
	if live {
		heal := func(ctx context.Context) (string, error) {
			c.Stop(x, 5*time.Second)
			if err := c.Start(x); err != nil {
				return "", err
			}
			return m.settleCorrupt(ctx, x)
		}
		return []int{x.I}, heal, detail, nil
	}
	if err := c.Start(x); err != nil {
		return []int{x.I}, restart, detail, err
	}
	heal := func(ctx context.Context) (string, error) { return m.settleCorrupt(ctx, x) }
	return []int{x.I}, heal, detail, nil
}

// writtenExtent is the offset just past the last non-zero byte of path,
// read backwards a MiB at a time, or -1 (the whole file) when it cannot
// be read.
func writtenExtent(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	buf := make([]byte, 1<<20)
	for end := fi.Size(); end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && n < int(end-start) {
			return -1
		}
		for j := n - 1; j >= 0; j-- {
			if buf[j] != 0 {
				return start + int64(j) + 1
			}
		}
		end = start
	}
	return 0
}

// settleCorrupt decides what became of a corrupted node and repairs it
// when it refused or stays NOT_SERVING.
func (m *Nemesis) settleCorrupt(ctx context.Context, x *Node) (string, error) {
	c := m.C
	sawNotServing := false
	end := time.Now().Add(corruptSettle)
	outcome, last := OutcomeStuck, ""
	for time.Now().Before(end) {
		if !x.Running() {
			outcome = OutcomeRefused
			break
		}
		if last = c.Health(ctx, m.Self, x); last == "SERVING" {
			if sawNotServing {
				return OutcomeRepaired, nil
			}
			return OutcomeServing, nil
		}
		sawNotServing = true
		sleepCtx(ctx, time.Second)
	}
	if outcome == OutcomeStuck {
		// The last answer tells a node that said NOT_SERVING from a health
		// check that could not ask it (say, a TLS handshake it refused).
		outcome += " (last health check: " + last + ")"
	}
	m.log.Warn("corrupted node does not serve: wiping it", "node", x.ID, "outcome", outcome)
	return outcome, c.Wipe(ctx, x)
}

// Wipe stops node x, empties its data directory and starts it again: it
// rejoins through its --join addresses and catches up from a snapshot.
// This is the documented repair of a node whose disk is corrupt.
func (c *Cluster) Wipe(ctx context.Context, x *Node) error {
	c.Stop(x, 5*time.Second)
	if err := wipeDir(x); err != nil {
		return err
	}
	return c.Start(x)
}

// Health asks node x, from the control namespace, for its gRPC health
// (SERVING, NOT_SERVING, or an error text).
func (c *Cluster) Health(ctx context.Context, self string, x *Node) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr := fmt.Sprintf("%s:%d", nodeIP(x.I), grpcPort)
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.Net.CtlNS(), self, "health", "--addr", addr}, c.adminCreds().Args()...)...).Output()
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}
