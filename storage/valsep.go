package storage

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Value separation: a value of at least valueSeparationMinBytes (a task
// body, an inline record with its payload) is written by the memtable
// flush into a blob file, and the table keeps a handle to it. Compactions
// then rewrite the handle, not the value, so a 1 MiB body is written to
// disk once (BENCHMARKS.md, "Value separation"). The keyspace holds the
// same keys and values either way: iterators, Get, the consistency hash
// and the snapshot stream read through the handle.
//
// Pebble calls the policy Experimental in v2.1. It reads blob files at
// every format from FormatValueSeparation on, which is what every
// keyspace of Docket has been opened at (pebbleFormat), so a build that
// keeps values inline still reads a keyspace that separated them, and its
// compactions fold the values back into tables.
const (
	// valueSeparationMinBytes keeps task headers, index keys and 128-byte
	// bodies in the tables, where a claim reads them with the key; a
	// separated value costs one more block read when it is fetched.
	valueSeparationMinBytes = 1 << 10
	// valueSeparationMaxDepth bounds how many overlapping blob files one
	// table may point into before a compaction copies its values into a
	// new blob file (Pebble's tests and CockroachDB use 10).
	valueSeparationMaxDepth = 10
	// valueSeparationGarbage is the share of blob bytes that no key
	// references any more (bodies of purged tasks in files that still hold
	// live ones) above which Pebble rewrites the blob files with the most
	// garbage. A queue that purges bodies in about the order it wrote them
	// lets most blob files die whole, and those are deleted without one.
	valueSeparationGarbage = 0.3
	// valueSeparationMinAge keeps a blob file from being rewritten while
	// its tasks are likely still being worked and purged.
	valueSeparationMinAge = 5 * time.Minute
)

// pebbleFormat is the Pebble format major version every keyspace is
// opened at, and ratcheted to when older (pebble.Open does that). It is
// the first that holds blob files; a Pebble that predates it refuses the
// keyspace at open. It is named, not pebble.FormatNewest, so that a
// Pebble upgrade changes the on-disk format only when this line does.
const pebbleFormat = pebble.FormatValueSeparation

func separateValues() pebble.ValueSeparationPolicy {
	return pebble.ValueSeparationPolicy{
		Enabled:               true,
		MinimumSize:           valueSeparationMinBytes,
		MaxBlobReferenceDepth: valueSeparationMaxDepth,
		RewriteMinimumAge:     valueSeparationMinAge,
		TargetGarbageRatio:    valueSeparationGarbage,
	}
}
