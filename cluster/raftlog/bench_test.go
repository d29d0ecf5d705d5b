package raftlog

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/dockethq/docket/fsm"
)

// The cost of the checksums: raft.db as BoltDB alone ("bolt") and through
// Store ("checked"). StoreLogs runs with fsync, as a node does, and
// without ("nosync"), which leaves the checksums' own CPU cost visible
// under the disk's noise. Entries carry the proposer's checksum in both, as
// the leader proposes them.
//
//	go test ./cluster -run '^$' -bench 'BenchmarkLogStore' -benchmem
func BenchmarkLogStore(b *testing.B) {
	open := func(b *testing.B, store string, noSync bool) raft.LogStore {
		opts := raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), NoSync: noSync}
		if store == "bolt" {
			s, err := raftboltdb.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		s, err := openCheckedStoreWith(opts, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	const batch = 32
	for _, size := range []int{256, 64 << 10} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		ext := fsm.CommandExtension(data, fsm.LevelBase)
		entries := func(first uint64) []*raft.Log {
			ls := make([]*raft.Log, batch)
			for i := range ls {
				ls[i] = &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand, Data: data, Extensions: ext, AppendedAt: time.Now()}
			}
			return ls
		}
		for _, sync := range []string{"sync", "nosync"} {
			for _, store := range []string{"bolt", "checked"} {
				b.Run(fmt.Sprintf("StoreLogs/%s/%s/batch=%d/size=%d", sync, store, batch, size), func(b *testing.B) {
					s := open(b, store, sync == "nosync")
					b.SetBytes(int64(batch * size))
					for i := 0; i < b.N; i++ {
						if err := s.StoreLogs(entries(uint64(i*batch) + 1)); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		for _, store := range []string{"bolt", "checked"} {
			b.Run(fmt.Sprintf("GetLog/%s/size=%d", store, size), func(b *testing.B) {
				s := open(b, store, true)
				const n = 256
				for i := 0; i < n; i += batch {
					if err := s.StoreLogs(entries(uint64(i) + 1)); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				var l raft.Log
				for i := 0; i < b.N; i++ {
					if err := s.GetLog(uint64(i%n)+1, &l); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The checksums' CPU cost alone, free of the disk's noise: what StoreLogs
// adds per entry on the leader (proposer check plus seal) and GetLog per
// read (verify).
func BenchmarkLogSumCPU(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		data := make([]byte, size)
		l := &raft.Log{Index: 7, Term: 2, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
		l.Extensions = fsm.CommandExtension(data, fsm.LevelBase)
		b.Run(fmt.Sprintf("store/size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				if err := fsm.VerifyCommand(l); err != nil {
					b.Fatal(err)
				}
				_ = entrySum(l, l.Extensions)
			}
		})
		b.Run(fmt.Sprintf("read/size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				_ = entrySum(l, l.Extensions)
			}
		})
	}
}
