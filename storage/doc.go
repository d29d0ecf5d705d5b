// Package storage owns Docket's Pebble keyspace: how keys are encoded, the
// typed reads and writes the FSM makes inside a batch, the read helpers the
// API serves from, and the snapshot stream format. It also owns the I/O
// around the keyspace, so that fsm stays the pure state machine: opening
// and tuning Pebble (db.go), Pebble's logger and event listener
// (events.go), and the keyspace's directory (restore.go), with the
// restore built beside the live database and swapped in.
//
// A keyspace's directory (Home) holds:
//
//	db/                    the live Pebble database
//	restore/               a restore being built from a snapshot stream
//	restore/RESTORE-COMPLETE  the restore is whole and may replace db/
//	old/                   the retired database, during the swap
//
// Keys carry the routing and values are mostly empty. Integers are big-endian
// and fixed width, so byte order is numeric order:
//
//	t/<id>                                  task record (protobuf), with its last 16 attempts (fsm.MaxHistory); from level 13 the header only
//	v/<id>                                  task body: its payload, written once (split records, level 13)
//	q/<queue>/<tenant>/p/<255-prio>/<seq>/<id>  pending, highest priority first, FIFO within it
//	q/<queue>/<tenant>/d/<visible_at>/<id>  delayed, per queue (listing)
//	q/<queue>/<tenant>/r/<id>               running
//	q/<queue>/<tenant>/x/<id>               dead letters
//	w/<visible_at>/<id>                     delayed, global wake index (the mover's scan)
//	l/<lease_until>/<id>                    lease expiry index (the reaper's scan)
//	o/<deadline_at>/<id>                    execution deadline of a running claim with a timeout (level 9)
//	e/<expire_at>/<id>                      retention of finished tasks
//	i/<queue>/<tenant>/<key>                idempotency key -> task id
//	c/<queue>/<tenant>                      queue catalog: counters and head hints
//	u/<tenant>                              tenant usage: stored tasks and their bytes
//	g/<queue>/<tenant>                      queue configuration (pb.QueueConfig: paused)
//	s/<tenant>/<name>                       a recurring task's schedule (pb.Schedule, last slot fired)
//	m/applied, m/now, m/feature             FSM metadata (m/feature: the latched feature level)
//	m/cluster-id                            the cluster's id (SetClusterID), set once
//
// Queue and tenant names never contain '/', which keeps every prefix unique.
//
// # Decisions and trade-offs
//
//   - A task lives under t/<id>; every index key holds an empty value and
//     points at it. A state change rewrites the record and moves one index
//     key, in one batch. The attempt history (feature level 6) is a
//     bounded list inside the record, not keys of its own: the task page
//     reads one key and purge deletes one.
//   - Split records (taskrecord.go, storage format 1, fsm level 13): the
//     payload is written once, under v/<id>, and t/<id> holds the rest
//     (the header). Before the split every heartbeat, submit and nack
//     rewrote the payload: 66,093 WAL bytes per heartbeat of a 64 KiB task
//     and 1,049,133 of a 1 MiB one, against 554 bytes with the split
//     (fsm BenchmarkHeartbeat_Bytes). The format is per record: a split
//     record begins with a zero byte (no protobuf message can) and a
//     format byte (1 with a body, 2 for an empty payload and no body key),
//     an inline one is the plain pb.Task. Readers take both, so there is
//     no migration step: a record is split at its first write after the
//     level latched, at the same log index on every replica. A rewrite of
//     the whole keyspace at boot or restore was rejected: it would change
//     the keyspace outside the log, and replicas that had and had not yet
//     migrated would hash differently at one applied index. Records no
//     task touches again stay inline until retention purges them. The
//     rules that change a task without answering with it (heartbeat,
//     submit, nack, reap) read the header alone (GetTaskHeader). A build
//     below the keyspace's latched level refuses to open it
//     (fsm.ErrKeyspaceTooNew) rather than misread split records.
//   - The catalog record is versioned by its first byte: 1 (counters and
//     heads), 2 (+ 8 lifetime totals, level 5), 3 (+ released, level 6).
//     A record is written in the newest version its cluster latched.
//   - Delayed tasks are indexed twice (per queue under d/, globally under w/),
//     like running tasks (r/ and l/): listing wants the per-queue view, and the
//     leader's mover must find due tasks in time proportional to how many are
//     due, not to how many queues exist.
//   - The catalog c/ keeps per-queue counters so Stats is O(queues), and a
//     head hint per priority: the lowest pending seq that can still exist.
//     New pending entries always take a larger seq (the log index), so a claim
//     seeks straight past the tombstones that earlier claims left at the head
//     of the range; without it a claim on a drained LSM range is O(deleted).
//     The hint Drained marks a priority with no pending task, which a claim
//     then skips without a seek; it is lowered when a task arrives.
//   - The tenant usage record u/<tenant> (version byte, tasks, bytes; 17
//     bytes) counts the tenant's task records in every state until purged
//     and their encoded bytes, for the per-tenant limits the FSM enforces.
//     The change is additive: a keyspace from an older build has no u/
//     keys, and its tasks are not counted until they are purged (the
//     counters clamp at zero instead of wrapping), so a limit is at first
//     lenient, never wrongly strict, and the same on every replica. The
//     counters are part of the snapshot and the keyspace hash like every
//     key.
//   - A queue's configuration (g/, queueconfig.go) is a record of its
//     own, not a field of the catalog record c/: the catalog holds
//     counters that come and go with the tasks, the configuration stays
//     until it is changed back. Only a queue with a setting away from the
//     default has a record; one that returns to every default is deleted,
//     so the range holds no dead records. Stats reads it per listed queue
//     (one Get, bloom-filtered when absent).
//   - Schedules (s/, schedule.go) are keyed tenant first: one tenant's
//     schedules are one range, which the per-tenant bound counts and
//     ListSchedules pages by name; the leader's scheduler scans all of s/.
//   - Idempotency keys live as long as their task: Purge deletes both. The
//     dedupe window is therefore the task's life plus its retention.
//   - Pebble tuning (OpenDB): a 32 MiB memtable and a block cache of
//     128 MiB plus two memtables, since Pebble charges its memtables to
//     the cache and with its defaults nothing else stayed cached; and
//     10-bit bloom filters on every level, so a Get of an absent key (a
//     new idempotency key) skips an sstable after one probe. Measured
//     with fsm's benchmarks, which is why the numbers live in code beside
//     them.
//   - The restore swap keeps one rule: the marker travels with the
//     restored directory and is removed last, so a crash at any step ends
//     with either the old keyspace or the complete new one. OpenHome
//     finishes an interrupted swap before anything opens the database,
//     and syncs every parent directory it creates: Pebble syncs only the
//     directory that holds its own files, and a power loss right after
//     the first boot must not lose the keyspace directory.
//   - A fatal error never exits here. Pebble's Fatalf (an invariant
//     broken, a write that must not fail) logs and panics with a
//     *FatalError: Pebble expects it not to return, and a panic keeps the
//     stack and lets the node's owner decide, where os.Exit skipped every
//     deferred clean-up. On one of Pebble's own goroutines the panic still
//     ends the process, as the exit did, now with the stack.
//   - The disk events carry no time; the node's health stamps them.
//   - A listing's cursor (ListTasks, StatsPage) is opaque: base64url of a
//     version byte (1) and the key of the last item listed (cursor.go).
//     Decoding checks the version, that the key lies strictly inside the
//     range being listed (same queue, tenant and state; for Stats, the
//     same queue filter) and that it parses as a key of that range, so a
//     cursor cannot move a scan into another tenant's keys; anything else
//     is ErrBadCursor, which fsm answers as a FieldError on "cursor"
//     (InvalidArgument). Not signed: a caller who forges a cursor of its
//     own range only skips ahead in it. Before, the cursor was the raw
//     key, which tied the API to the key layout and held binary seq bytes
//     that a proto string field cannot carry. Raw-key cursors of older
//     builds are refused: a listing that spans an upgrade starts again.
package storage
