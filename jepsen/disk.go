package jepsen

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// diskEvery is how often watchDisk samples each node's image.
const diskEvery = 2 * time.Second

// watchDisk samples, until ctx ends, the used bytes of each node's
// loop-mounted data dir (statfs of the mount, skipped while it is not
// mounted), and returns a func giving
// each node's peak so far. A node's image is its whole disk, so its peak
// is what a run of this length needs; a flapping wal leader that fills it
// shows here before it shows as a refused write.
func (c *Cluster) watchDisk(ctx context.Context) func() map[string]uint64 {
	var mu sync.Mutex
	peak := map[string]uint64{}
	sample := func() {
		for _, n := range c.Nodes {
			var st, parent syscall.Statfs_t
			if syscall.Statfs(n.DataDir, &st) != nil || syscall.Statfs(filepath.Dir(n.DataDir), &parent) != nil ||
				st.Fsid == parent.Fsid {
				// Between an unmount and a mount (the crash copy of
				// lost-unfsynced-writes): the path is then a directory of
				// the host's disk, whose use is not the node's.
				continue
			}
			used := (st.Blocks - st.Bfree) * uint64(st.Bsize)
			mu.Lock()
			peak[n.ID] = max(peak[n.ID], used)
			mu.Unlock()
		}
	}
	go func() { // ends with ctx, which the run cancels on every exit path
		t := time.NewTicker(diskEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()
	// The peak is read after the loop images are unmounted (deferred
	// after teardownLoop), so it does not sample again.
	return func() map[string]uint64 {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]uint64, len(peak))
		for k, v := range peak {
			out[k] = v
		}
		return out
	}
}

// reportDisk writes disk.json (each node's peak use and the image size)
// into the report directory and logs it.
func (c *Cluster) reportDisk(dir string, peak map[string]uint64) {
	out := struct {
		Image     string            `json:"image"`
		PeakBytes map[string]uint64 `json:"peak_bytes"`
	}{c.loopImageSize(), peak}
	b, err := json.MarshalIndent(out, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "disk.json"), append(b, '\n'), 0o644)
	}
	c.log.Info("disk: peak use per node", "image", out.Image, "peak_bytes", peak, "err", err)
}
