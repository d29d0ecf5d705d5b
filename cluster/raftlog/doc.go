// Package raftlog is a node's Raft log and stable store: raft-boltdb/v2 or
// raft-wal behind one Store that checksums every entry and stable value,
// refuses damaged bytes with ErrRaftStoreCorrupt, and counts the bytes of
// the entries it holds for the log's byte budget.
//
// What it must not do: acknowledge a write that is not fsync'd, repair a
// damaged log on its own, or switch a data dir from one store to the other.
package raftlog
