import { randomBytes } from "node:crypto";

/**
 * uuidv7 mints the idempotency key enqueue gives an item that has none: a
 * UUIDv7 (RFC 9562), the Unix time in milliseconds first, then 74 random bits.
 *
 * The cluster keeps each key in an index ordered by the key, on every
 * replica, for the task's retention. Random keys (UUIDv4) land anywhere in
 * it; keys that rise with time are appended at its end, which is cheaper for
 * the memtable and for every compaction. The cluster never reads the time
 * back: a key is opaque to it.
 */
export function uuidv7(nowMs: number = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(nowMs, 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70; // version 7
  b[8] = (b[8]! & 0x3f) | 0x80; // variant 10
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
