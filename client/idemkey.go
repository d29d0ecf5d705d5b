package client

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newKey returns the idempotency key Enqueue gives a task that has none: a
// UUIDv7 (RFC 9562) in 32 hex digits, the Unix time in milliseconds first,
// then 74 random bits.
//
// Why time first: the cluster stores each key under i/<queue>/<tenant>/<key>
// for the task's retention, on every replica. Random keys land anywhere in
// that range, so every insert searches Pebble's memtable from its top and
// every compaction of the range overlaps every table of it. Keys that rise
// with time are appended at the range's end, the way a B-tree index prefers
// UUIDv7 to UUIDv4. The 74 random bits keep two clients minting in the same
// millisecond apart (a collision needs about 2^37 keys in one millisecond).
// The cluster never reads the time back: a key is opaque to it.
func newKey() string { return newKeyAt(time.Now()) }

// newKeyAt is newKey at a given time, for tests.
func newKeyAt(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (it crashes the program instead)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return hex.EncodeToString(b[:])
}

// randomHex returns n random bytes in hex, for names that must not collide
// and need no order.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}
