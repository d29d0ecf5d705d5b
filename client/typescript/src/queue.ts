// A queue's settings in the client's types: strings for the wire's enums,
// numbers for its counts. Both ways, what setQueueLimits sends and what
// stats reads back, so that one spelling serves both.
import { PerKeyPending as WirePerKeyPending, QueueOrder as WireOrder, type QueueStats, type QueueTotals as WireTotals } from "./gen/docketv1/task.js";
import { InvalidArgumentError } from "./errors.js";
import { dateOf } from "./task.js";

/**
 * The order claims take a fair queue's pending tasks in: "fifo" (priority,
 * then enqueue order) or "fair" (priority, then the key with the fewest
 * running tasks per weight, ties to the key served longest ago, FIFO within
 * a key), so one key's backlog does not hold the other keys' tasks back.
 */
export type QueueOrder = "fifo" | "fair";
/** Which pending tasks of a key a debounced queue keeps; "all" turns debounce off. */
export type PerKeyPending = "all" | "keep-newest" | "keep-oldest";

/**
 * What setQueueLimits changes. An unset field keeps the queue's value; 0
 * clears that limit (as in the Go client's QueueLimits).
 */
export interface QueueLimits {
  /** At most this many of the queue's tasks RUNNING at once: a claim takes at most maxRunning - running, maybe none. */
  maxRunning?: number;
  /**
   * Claims take at most rateMilli/1000 tasks a second (a token bucket; the
   * wire's unit, so a rate below one a second needs no fraction). Changing
   * it or burst refills the bucket.
   */
  rateMilli?: number;
  /** The bucket's size; 0 with a rate: the rate's tasks per second, at least 1. */
  burst?: number;
  /**
   * Fair queues (feature level 16): at most this many RUNNING tasks of one
   * key (its taskKey); setKeyLimit overrides it for one key.
   */
  maxRunningPerKey?: number;
  /** The claim order; "fifo" clears "fair". */
  order?: QueueOrder;
  /**
   * Debounce: with perKeyPendingDepth D a key keeps its D newest or oldest
   * pending tasks and the others end cancelled (reason "debounced"). The
   * server asks for the depth with a keep rule, so no task is cancelled on
   * a depth nobody stated.
   */
  perKeyPending?: PerKeyPending;
  perKeyPendingDepth?: number;
}

// Each enum's spellings are listed once and read both ways: what
// setQueueLimits sends and what stats reads back cannot drift apart.
const orders: ReadonlyArray<readonly [QueueOrder, WireOrder]> = [
  ["fifo", WireOrder.QUEUE_ORDER_FIFO],
  ["fair", WireOrder.QUEUE_ORDER_FAIR],
];
const perKeyPendings: ReadonlyArray<readonly [PerKeyPending, WirePerKeyPending]> = [
  ["all", WirePerKeyPending.PER_KEY_PENDING_ALL],
  ["keep-newest", WirePerKeyPending.PER_KEY_PENDING_KEEP_NEWEST],
  ["keep-oldest", WirePerKeyPending.PER_KEY_PENDING_KEEP_OLDEST],
];

// toWire refuses a spelling outside pairs: a JavaScript caller's typo
// would otherwise go out as the enum's 0 (FIFO, keep all).
function toWire<S extends string, W>(pairs: ReadonlyArray<readonly [S, W]>, s: S, name: string, field: string): W {
  const hit = pairs.find(([k]) => k === s);
  if (hit === undefined) {
    const want = pairs.map(([k]) => JSON.stringify(k));
    throw new InvalidArgumentError(`docket: ${name} ${JSON.stringify(s)}: ${want.slice(0, -1).join(", ")} or ${want[want.length - 1]}`, { field });
  }
  return hit[1];
}

// fromWire is undefined for a value a newer server knows and this client
// does not.
function fromWire<S extends string, W>(pairs: ReadonlyArray<readonly [S, W]>, w: W): S | undefined {
  return pairs.find(([, v]) => v === w)?.[0];
}

export const wireOrder = (o: QueueOrder): WireOrder => toWire(orders, o, "order", "order");
export const wirePerKeyPending = (p: PerKeyPending): WirePerKeyPending => toWire(perKeyPendings, p, "perKeyPending", "per_key_pending");

/**
 * A queue's lifetime transition counts, replicated state: they survive
 * leader changes and restarts.
 */
export interface QueueTotals {
  enqueued: number;
  claimed: number;
  completed: number;
  failed: number;
  cancelled: number;
  deadLettered: number;
  /** Back to pending or delayed from running or dead. */
  requeued: number;
  /** Running tasks whose lease expired. */
  leaseExpired: number;
  /** Running tasks put back because their claim's answer never reached the worker (feature level 6). */
  released: number;
}

/**
 * One queue of one tenant, as stats reports it. Its limits and rules carry
 * QueueLimits' names, types and spellings, so a value read here is given
 * back to setQueueLimits as it is.
 *
 * Counts are uint64 on the wire and come out of Number(): exact up to 2^53
 * (about 9e15), which no count comes near (a million enqueues a second
 * would take 285 years). Past it a count rounds to the nearest double, it
 * does not wrap or throw; raw keeps the exact bigint. A bigint here would
 * make every reader convert before comparing or doing arithmetic.
 */
export interface QueueInfo {
  queue: string;
  tenant: string;
  pending: number;
  delayed: number;
  running: number;
  dead: number;
  /** Finished and not yet purged: completed, failed and cancelled. */
  completed: number;
  /** Waiting on parents (feature level 11). */
  waiting: number;
  /** When the head pending task was enqueued; undefined with none pending. */
  oldestPendingAt?: Date;
  /** Claims take nothing until resumeQueue. */
  paused: boolean;
  /** Undefined until the cluster enabled feature level 5 and the queue changed since. */
  totals?: QueueTotals;
  /** The queue's limits (feature level 10), 0 when unset, as QueueLimits' fields of the same names. */
  maxRunning: number;
  rateMilli: number;
  burst: number;
  /** The rate's bucket: its tokens x1000 as of the answering replica's last applied entry. */
  tokensMilli: number;
  /**
   * The tenant's own concurrency limit, 0 when none: setQueueLimits with an
   * empty queue name sets it as maxRunning.
   */
  tenantMaxRunning: number;
  /** The tenant's running tasks across all its queues. */
  tenantRunning: number;
  /** The fair-queue rules (feature level 16); a server before it reports 0, "fifo" and "all". */
  maxRunningPerKey: number;
  /**
   * Undefined only for an order a newer server knows and this client does
   * not: given back to setQueueLimits, undefined keeps the queue's order,
   * where any spelling of ours would change it.
   */
  order?: QueueOrder;
  /** Undefined only for a rule this client does not know, as with order. */
  perKeyPending?: PerKeyPending;
  perKeyPendingDepth: number;
  /** The wire record. */
  raw: QueueStats;
}

const totalsOf = (t: WireTotals): QueueTotals => ({
  enqueued: Number(t.enqueued),
  claimed: Number(t.claimed),
  completed: Number(t.completed),
  failed: Number(t.failed),
  cancelled: Number(t.cancelled),
  deadLettered: Number(t.deadLettered),
  requeued: Number(t.requeued),
  leaseExpired: Number(t.leaseExpired),
  released: Number(t.released),
});

export function queueInfo(s: QueueStats): QueueInfo {
  return {
    queue: s.queue,
    tenant: s.tenant,
    pending: Number(s.pending),
    delayed: Number(s.delayed),
    running: Number(s.running),
    dead: Number(s.dead),
    completed: Number(s.completed),
    waiting: Number(s.waiting),
    oldestPendingAt: dateOf(s.oldestPendingAt),
    paused: s.paused,
    totals: s.totals === undefined ? undefined : totalsOf(s.totals),
    maxRunning: s.maxRunning,
    rateMilli: Number(s.rateMilli),
    burst: s.burst,
    tokensMilli: Number(s.tokensMilli),
    tenantMaxRunning: s.tenantMaxRunning,
    tenantRunning: Number(s.tenantRunning),
    maxRunningPerKey: s.maxRunningPerKey,
    order: fromWire(orders, s.order),
    perKeyPending: fromWire(perKeyPendings, s.perKeyPending),
    perKeyPendingDepth: s.perKeyPendingDepth,
    raw: s,
  };
}
