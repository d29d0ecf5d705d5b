//go:build unix

package raftlog

import (
	"os"
	"syscall"
)

// onDisk is the space a file holds: its allocated blocks (a preallocated
// raft-wal segment counts whole, a sparse file does not), or its size
// where the system does not say.
func onDisk(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(fi.Size())
}
