package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// writePIDFile writes this process's id into the data dir while the agent
// serves: `docket dev` reads it to show, and stop at Ctrl-C, a node an
// operator restarted by hand.
func writePIDFile(dataDir string) error {
	path := filepath.Join(dataDir, localcluster.PIDFile)
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	return nil
}

// removePIDFile removes the pid file if it still names this process (a
// second agent on the same dir would have failed to lock it).
func removePIDFile(dataDir string, log *slog.Logger) {
	path := filepath.Join(dataDir, localcluster.PIDFile)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		return
	}
	if err := os.Remove(path); err != nil {
		log.Warn("pid file not removed", "path", path, "err", err)
	}
}

// warnKeyFileMode warns when a gossip key file may be read by others than
// its owner: anyone who reads the key can join or read gossip. `docket
// gossip keygen > gossip.key` makes such a file under the usual umask 022.
func warnKeyFileMode(log *slog.Logger, path string) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		return // gossipKeys already read it; a race here is not worth an error
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		log.Warn("the gossip key file is readable by group or others: anyone who reads it can join and read gossip; chmod 600 it",
			"file", path, "mode", fmt.Sprintf("%04o", perm))
	}
}
