package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/dockethq/docket/internal/testwait"
)

// BenchmarkWriteNewRecords compares two ways of putting new task records
// into the keyspace, for the design of a checkpoint (fsm/DESIGN.md): the
// way apply writes them today, a batch of 256 records and the hot keys
// committed into the memtable, then flushed and compacted; and a
// checkpoint that writes each round's records as one sorted table and
// ingests it, with the hot keys in a batch. Records are 250-byte values
// under growing t/ ids, as an enqueue of 128 B tasks writes them. The
// measure is the process's CPU per record from the first write until
// Pebble has flushed and no compaction runs (settle), and the bytes Pebble wrote.
//
//	go test ./storage -run '^$' -bench WriteNewRecords -benchtime 1x
func BenchmarkWriteNewRecords(b *testing.B) {
	const rounds, perRound = 8, 50_000
	value := make([]byte, 250)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	hot := func(bt *pebble.Batch, round int) error {
		for _, k := range []string{"c/bench/t", "m/applied", "u/t"} {
			if err := bt.Set([]byte(k), fmt.Appendf(nil, "%d", round), nil); err != nil {
				return err
			}
		}
		return nil
	}
	key := func(id int) []byte { return fmt.Appendf(nil, "t/%020x", id) }
	for _, way := range []string{"batch", "ingest"} {
		b.Run(way, func(b *testing.B) {
			for range b.N {
				dir := b.TempDir()
				db, err := OpenDB(filepath.Join(dir, "db"), DBOptions{})
				if err != nil {
					b.Fatal(err)
				}
				cpu0, t0 := processCPU(), time.Now()
				id := 0
				for r := range rounds {
					if way == "batch" {
						for n := 0; n < perRound; n += 256 {
							bt := db.NewBatch()
							for range min(256, perRound-n) {
								id++
								if err := bt.Set(key(id), value, nil); err != nil {
									b.Fatal(err)
								}
							}
							if err := hot(bt, r); err != nil {
								b.Fatal(err)
							}
							if err := bt.Commit(pebble.NoSync); err != nil {
								b.Fatal(err)
							}
						}
						continue
					}
					path := filepath.Join(dir, fmt.Sprintf("ckpt-%d.sst", r))
					f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
					if err != nil {
						b.Fatal(err)
					}
					// The tables a flush writes: Pebble's block size, Snappy,
					// and Docket's bloom filter.
					w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
						TableFormat:  db.TableFormat(),
						Compression:  sstable.SnappyCompression,
						FilterPolicy: bloom.FilterPolicy(bloomBitsPerKey),
					})
					for range perRound {
						id++
						if err := w.Set(key(id), value); err != nil {
							b.Fatal(err)
						}
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
					if err := db.Ingest(context.Background(), []string{path}); err != nil {
						b.Fatal(err)
					}
					bt := db.NewBatch()
					if err := hot(bt, r); err != nil {
						b.Fatal(err)
					}
					if err := bt.Commit(pebble.NoSync); err != nil {
						b.Fatal(err)
					}
				}
				if err := Flush(db, time.Minute); err != nil {
					b.Fatal(err)
				}
				settle(b, db)
				cpu, wall := processCPU()-cpu0, time.Since(t0)
				m := db.Metrics()
				total := m.Total()
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(id), "cpu-ns/record")
				b.ReportMetric(float64(wall.Nanoseconds())/float64(id), "wall-ns/record")
				b.ReportMetric(float64(total.TableBytesFlushed+total.TableBytesCompacted+total.TableBytesIngested)/float64(id), "table-bytes/record")
				b.ReportMetric(float64(m.Compact.Count-m.Compact.MoveCount), "rewriting-compactions")
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// settle waits, for at most a minute, until no compaction has run or
// finished for half a second, so that the writes' compactions are
// counted.
func settle(b *testing.B, db *pebble.DB) {
	quiet, last := 0, int64(-1)
	testwait.For(b, time.Minute, "Pebble's compactions to settle", func() bool {
		m := db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet = 0
		}
		last = m.Compact.Count
		return quiet >= int(500*time.Millisecond/testwait.Interval)
	})
}

// processCPU is the process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
