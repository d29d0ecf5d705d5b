package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrDamaged means the keyspace's files failed Pebble's checksums: a
// table block, or the MANIFEST, holds bytes that are not what Pebble
// wrote. Replaying the Raft log cannot mend them, so the node refuses to
// open the keyspace until an operator repairs it.
var ErrDamaged = errors.New("keyspace damaged on disk")

// DamageMarker is the file a fatal report of on-disk damage leaves in the
// keyspace's directory. Pebble reports such damage from a background
// compaction, about a second after open, and stops the process; without
// the marker every restart ran into the same block and stopped the same
// way, with a stack trace instead of a repair.
const DamageMarker = "DOCKET-DAMAGED"

// Repair is what an operator does for a damaged keyspace: the node's
// replicas elsewhere hold the same state, so it is rebuilt from them.
const Repair = "remove the node from the configuration (docket cluster remove ID), move its data dir aside (keep it for a post-mortem), and start it again with an empty data dir and --join: it catches up from a snapshot (README, Damage and repair)"

// isDamage reports whether a fatal Pebble message is about bytes on disk
// (a checksum mismatch or another corruption), not a broken invariant.
func isDamage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "corruption") || strings.Contains(m, "checksum mismatch")
}

// markDamaged leaves the marker with Pebble's message, best effort: the
// process stops right after, and the message is logged in any case.
func markDamaged(log *slog.Logger, fs vfs.FS, dir, msg string) {
	log.Error("the keyspace is damaged on disk; this node stops and refuses to start until repaired",
		"dir", dir, "repair", Repair)
	f, err := fs.Create(fs.PathJoin(dir, DamageMarker), vfs.WriteCategoryUnspecified)
	if err != nil {
		log.Error("cannot leave the damage marker", "err", err)
		return
	}
	_, werr := io.WriteString(f, msg+"\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		log.Error("cannot leave the damage marker", "err", err)
	}
}

// checkDamage refuses a keyspace that holds the marker, naming the repair.
func checkDamage(fs vfs.FS, dir string) error {
	path := fs.PathJoin(dir, DamageMarker)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return fmt.Errorf("%w: %s reports %s: %s", ErrDamaged, path, strings.TrimSpace(string(b)), Repair)
}
