package health

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// BallastFile is the ballast's name in the data dir (cluster.Config.BallastBytes).
const BallastFile = "BALLAST"

// errNoRoom means the disk has less than twice the ballast free.
var errNoRoom = errors.New("not enough free space")

// EnsureBallast creates dir/BALLAST of size bytes when it is missing and
// the disk has at least 2*size free, so that the ballast never takes the
// last of the space itself. An existing ballast is kept as it is. The file
// is written, not truncated to size: a sparse file would free nothing when
// deleted. Failing to create it is logged, not fatal: the ballast is an
// aid to the operator, and a node without one still runs.
func EnsureBallast(dir string, size int64, log *slog.Logger) {
	if size <= 0 {
		return
	}
	path := filepath.Join(dir, BallastFile)
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return // present, or unknowable; either way not ours to write
	}
	if err := writeBallast(dir, path, size); err != nil {
		log.Warn("no ballast file: the operator has no space to free on a full disk", "path", path, "bytes", size, "err", err)
		return
	}
	log.Info("ballast file created; delete it to free space if the disk fills", "path", path, "bytes", size)
}

func writeBallast(dir, path string, size int64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free < 2*uint64(size) {
		return fmt.Errorf("%w: %d bytes free, want %d", errNoRoom, free, 2*size)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0 && err == nil; left -= int64(len(zeros)) {
		_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
	}
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: the error above is the one to report
		return err
	}
	return syncDirPath(dir)
}

// syncDirPath makes dir's entries (the renamed ballast) durable.
func syncDirPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
