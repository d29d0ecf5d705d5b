//go:build !unix

package raftlog

import "os"

// onDisk is the space a file holds; without block counts, its size.
func onDisk(fi os.FileInfo) uint64 { return uint64(fi.Size()) }
