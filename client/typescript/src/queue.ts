// A queue's settings in the client's types: strings for the wire's enums,
// numbers for its counts.
import { PerKeyPending as WirePerKeyPending, QueueOrder as WireOrder } from "./gen/docketv1/task.js";
import { InvalidArgumentError } from "./errors.js";

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

export function wireOrder(o: QueueOrder): WireOrder {
  switch (o) {
    case "fifo":
      return WireOrder.QUEUE_ORDER_FIFO;
    case "fair":
      return WireOrder.QUEUE_ORDER_FAIR;
  }
  // A JavaScript caller's typo would otherwise go out as FIFO, enum 0.
  throw new InvalidArgumentError(`docket: order ${JSON.stringify(o)}: "fifo" or "fair"`, { field: "order" });
}

export function wirePerKeyPending(p: PerKeyPending): WirePerKeyPending {
  switch (p) {
    case "all":
      return WirePerKeyPending.PER_KEY_PENDING_ALL;
    case "keep-newest":
      return WirePerKeyPending.PER_KEY_PENDING_KEEP_NEWEST;
    case "keep-oldest":
      return WirePerKeyPending.PER_KEY_PENDING_KEEP_OLDEST;
  }
  throw new InvalidArgumentError(`docket: perKeyPending ${JSON.stringify(p)}: "all", "keep-newest" or "keep-oldest"`, { field: "per_key_pending" });
}
