package main

import (
	"context"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dockethq/docket/cluster"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// snapshot saves a backup of the cluster's keyspace to a file, or
// restores one. Both need an admin token over "*" when auth is on. save
// writes FILE only once the whole backup arrived (through FILE.part), so
// a FILE is always a complete backup; restore checks the file here first,
// and the leader checks it again before Raft sees it.
func (v *verb) snapshot(ctx context.Context, args []string) error {
	force := v.fs.Bool("force", false, "save: replace FILE if it exists")
	const what = "save FILE [--force] | snapshot restore FILE"
	pos, err := v.parse(args, 2, 2, what)
	if err != nil {
		return err
	}
	sub, path := pos[0], pos[1]
	if !flagSet(v.fs, "timeout") {
		v.c.timeout = 30 * time.Minute // a backup is as large as the keyspace
	}
	if sub != "save" && sub != "restore" {
		return fmt.Errorf("%w: docket snapshot %s", errUsage, what)
	}
	if sub == "restore" {
		return v.restore(ctx, path)
	}
	// An existing backup may be the only good one: replace it only when
	// asked, and say so before any work.
	if _, err := os.Lstat(path); err == nil && !*force {
		return fmt.Errorf("snapshot save: %s exists; pass --force to replace it, or save to a new name", path)
	} else if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("snapshot save: %w", err)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		part := path + ".part"
		f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("snapshot save: %w", err)
		}
		n, err := c.SnapshotSave(ctx, f)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(part, path)
		}
		if err != nil {
			if rerr := os.Remove(part); rerr != nil && !os.IsNotExist(rerr) {
				err = fmt.Errorf("%w (and %s is left: %v)", err, part, rerr)
			}
			return fmt.Errorf("snapshot save: %w", err)
		}
		h, err := readHeader(path)
		if err != nil {
			return fmt.Errorf("snapshot save: the file written does not check: %w", err)
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "saved %s: %d bytes, index %d, from %s at %s\n", filepath.Base(path), n, h.Index, h.Node, h.Created.Format(time.RFC3339))
		}, &pb.SnapshotRestoreResponse{BackupIndex: h.Index, BackupNode: h.Node, BackupCreated: h.Created.UnixNano()})
	})
}

func (v *verb) restore(ctx context.Context, path string) error {
	h, err := readHeader(path)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	defer f.Close()
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		resp, err := c.SnapshotRestore(ctx, f)
		if err != nil {
			return fmt.Errorf("snapshot restore: %w", err)
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "restored %s (index %d, from %s at %s); the cluster goes on from index %d\n",
				filepath.Base(path), h.Index, h.Node, h.Created.Format(time.RFC3339), resp.GetAppliedIndex())
		}, resp)
	})
}

func readHeader(path string) (cluster.BackupHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return cluster.BackupHeader{}, err
	}
	defer f.Close()
	h, _, _, err := cluster.ReadBackupHeader(f)
	return h, err
}
