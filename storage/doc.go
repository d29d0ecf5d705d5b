// Package storage owns Docket's Pebble keyspace: how keys and records are
// encoded, the typed reads and writes the FSM makes inside a batch, the
// read helpers the API serves from, and the snapshot stream format. It
// also owns the I/O around the keyspace, so that fsm stays the pure state
// machine: opening and tuning Pebble (db.go), Pebble's logger and event
// listener (events.go), and the keyspace's directory (restore.go), where a
// restore is built beside the live database and swapped in only when
// complete.
//
// What it must not do: decide a queue rule (what to write, and when, is
// fsm's), read a clock, keep state between calls, or let a tuning option
// change what the keyspace holds. A task lives in exactly one place,
// t/<id> (its payload in v/<id>), and every index key points at it.
//
// DESIGN.md has the directory layout, every key prefix and record format,
// the snapshot stream, the listing cursors, and the decisions and
// trade-offs behind them.
package storage
