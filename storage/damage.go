package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrDamaged means the keyspace's files failed Pebble's checksums: a
// table block, or the MANIFEST, holds bytes that are not what Pebble
// wrote. Replaying the Raft log cannot mend them, so the node refuses to
// open the keyspace until an operator repairs it.
var ErrDamaged = errors.New("keyspace damaged on disk")

// ErrUndecodable means a record holds bytes that apply never wrote and
// that do not decode, though Pebble's checksums hold: the keyspace is
// damaged all the same, and its repair is the same. A reader that must
// decode every record of a kind (Open's rebuild of the claim order) wraps
// it, so that the open refuses as for damage.
var ErrUndecodable = errors.New("a record does not decode")

// DamageMarker is the file a fatal report of on-disk damage leaves in the
// keyspace's directory. Pebble reports such damage from a background
// compaction, about a second after open, and stops the process; without
// the marker every restart ran into the same block and stopped the same
// way, with a stack trace instead of a repair.
const DamageMarker = "DOCKET-DAMAGED"

// Repair is what an operator does for a damaged keyspace: the node's
// replicas elsewhere hold the same state, so it is rebuilt from them.
const Repair = "remove the node from the configuration (docket cluster remove ID), move its data dir aside (keep it for a post-mortem), and start it again with an empty data dir and --join: it catches up from a snapshot (README, Damage and repair)"

// IsDamage reports whether err is a read that met bytes on disk that are
// not what Pebble wrote (a checksum mismatch, a malformed block: Pebble
// marks these as corruption), as opposed to a closed database or a broken
// invariant. Pebble returns such errors from a Get, an iterator or a
// value's closer, and for a blob file it does so without telling its
// event listener. Matching Pebble's mark rather than the message keeps
// other checksums (a command's, a log entry's) out of it.
func IsDamage(err error) bool {
	return err != nil && (errors.Is(err, ErrDamaged) || errors.Is(err, ErrUndecodable) || pebble.IsCorruptionError(err))
}

// firstLine keeps a message to its first line: Pebble's errors print
// their stack on the lines after it, which a refusal has no use for.
func firstLine(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return msg
}

// damageWatch turns Pebble's reports of on-disk corruption into the
// marker and one ErrDamaged for the keyspace's owner. Pebble's default is
// a Fatalf from inside the read that met the damage; in a compaction that
// unwound Pebble's buffers mid-use and died of a second panic, before any
// caller could refuse cleanly. Pebble records the span as a problem and
// keeps its compactions away from it, so returning is safe.
type damageWatch struct {
	log      *slog.Logger
	fs       vfs.FS
	dir      string
	onDamage func(error)
	reported atomic.Bool
}

// report leaves the marker and tells the owner, the first time only:
// Pebble reports every read of the damaged block.
func (w *damageWatch) report(msg string) error {
	msg = firstLine(msg)
	err := fmt.Errorf("%w: %s: %s", ErrDamaged, msg, Repair)
	if !w.reported.CompareAndSwap(false, true) {
		return err
	}
	markDamaged(w.log, w.fs, w.dir, msg)
	if w.onDamage != nil {
		w.onDamage(err)
	}
	return err
}

func (w *damageWatch) dataCorruption(info pebble.DataCorruptionInfo) {
	cause := "corruption"
	if info.Details != nil {
		cause = info.Details.Error()
	}
	w.report(fmt.Sprintf("%s: %s", info.Path, cause))
}

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
		"dir", dir, "damage", firstLine(msg), "repair", Repair)
	f, err := fs.Create(fs.PathJoin(dir, DamageMarker), vfs.WriteCategoryUnspecified)
	if err != nil {
		log.Error("cannot leave the damage marker", "err", err)
		return
	}
	_, werr := io.WriteString(f, firstLine(msg)+"\n")
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
	return fmt.Errorf("%w: %s reports %s: %s", ErrDamaged, path, firstLine(string(b)), Repair)
}
