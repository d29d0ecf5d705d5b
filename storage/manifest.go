package storage

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// manifestRepairs counts the opens that found the MANIFEST damaged.
var manifestRepairs atomic.Uint64

// ManifestRepairs is how many times this process opened a keyspace whose
// MANIFEST Pebble could read only in part (see checkManifest).
func ManifestRepairs() uint64 { return manifestRepairs.Load() }

// manifestDamage is what checkManifest found: the MANIFEST's first bad
// record, after good ones.
type manifestDamage struct {
	path       string
	at, size   int64
	goodBefore int
	err        error
}

// checkManifest reads the keyspace's current MANIFEST as Pebble will, and
// returns what it found when a record fails its checksum before the file
// ends, or nil. Pebble treats such a record as the end of the MANIFEST and
// opens the state recorded before it, without an error: an older
// checkpoint, from which the Raft log (or a snapshot, when the log no
// longer reaches back) brings the node up to date. That repair is sound,
// but without a word the node started from an older applied index (often
// 0) and nothing said why. When the very first record is bad, Pebble
// cannot open at all, and the open's error is the finding.
//
// A record torn by a crash in the middle of Pebble's write also ends the
// file early; it is reported the same way, since the two cannot be told
// apart and either one leaves the older state.
func checkManifest(fs vfs.FS, dir string) *manifestDamage {
	name := currentManifest(fs, dir)
	if name == "" {
		return nil
	}
	path := fs.PathJoin(dir, name)
	f, err := fs.Open(path)
	if err != nil {
		return nil // Pebble's open reports it
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	rr := record.NewReader(f, 0)
	for good := 0; ; good++ {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &manifestDamage{path: path, at: rr.Offset(), size: st.Size(), goodBefore: good, err: err}
		}
	}
}

// report logs and counts damage Pebble opened past.
func (d *manifestDamage) report(log *slog.Logger) {
	manifestRepairs.Add(1)
	log.Warn("the keyspace's MANIFEST is damaged: Pebble opened the state recorded before the damage, and this node replays the Raft log (or restores a snapshot) from that state's applied index",
		"file", d.path, "at", d.at, "size", d.size, "records_read", d.goodBefore, "err", d.err)
}

// currentManifest names the MANIFEST Pebble will read: the one its marker
// file points at, or else the newest by number. "" when there is none (a
// new keyspace).
func currentManifest(fs vfs.FS, dir string) string {
	names, err := fs.List(dir)
	if err != nil {
		return ""
	}
	var manifests []string
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, "marker.manifest."); ok {
			// marker.manifest.<iteration>.<MANIFEST-n>
			if _, m, ok := strings.Cut(rest, "."); ok {
				return m
			}
		}
		if strings.HasPrefix(n, "MANIFEST-") {
			manifests = append(manifests, n)
		}
	}
	if len(manifests) == 0 {
		return ""
	}
	slices.Sort(manifests) // zero-padded numbers sort as numbers
	return manifests[len(manifests)-1]
}
