// Fair queues against the real cluster: the queue's per-key limit and
// order, one key's override, the per-key counts ListKeys reports, and
// the limits and rules as stats reads them back.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { FeatureDisabledError, InvalidArgumentError, type QueueInfo, type QueueLimits, type TaskInfo } from "../src/index.js";
import { newClient, queueName, until } from "./helpers.js";

const c = newClient();
after(() => c.close());

// A new cluster latches feature level 16 (fair queues) once its nodes have
// told each other their versions; until then the per-key fields are refused.
before(async () => {
  const probe = queueName("fair-level");
  await until("the fair queues' feature level", async () => {
    try {
      await c.setQueueLimits(probe, { order: "fair" });
      return true;
    } catch (e) {
      if (e instanceof FeatureDisabledError) return false;
      throw e;
    }
  }, 60_000, 200);
});

/** Enqueues n tasks of key, one request each, so their order is enqueue order. */
async function enqueueKeyed(q: string, key: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await c.enqueue(q, { key, i }, { taskKey: key }));
  return ids;
}

const keysOf = (ts: TaskInfo[]) => ts.map((t) => t.key).sort();

const statsOf = async (q: string): Promise<QueueInfo> => {
  const st = (await c.stats(q)).find((s) => s.queue === q);
  assert.ok(st, `stats lists ${q}`);
  return st;
};

/** Every limit setQueueLimits takes, read from stats: typed as QueueLimits with no conversion. */
const limitsOf = (s: QueueInfo): QueueLimits => ({
  maxRunning: s.maxRunning,
  rateMilli: s.rateMilli,
  burst: s.burst,
  maxRunningPerKey: s.maxRunningPerKey,
  order: s.order,
  perKeyPending: s.perKeyPending,
  perKeyPendingDepth: s.perKeyPendingDepth,
});

test("setQueueLimits makes a queue fair with a per-key limit; a repeat answers unchanged", async () => {
  const q = queueName("fair-cfg");
  await c.enqueue(q, "listed in stats");
  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), true);
  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), false, "every value was already so");
  const st = (await c.stats(q)).find((s) => s.queue === q);
  assert.equal(st?.maxRunningPerKey, 1);
  assert.equal(st?.order, "fair");
  assert.equal(await c.setQueueLimits(q, { maxRunning: 5, rateMilli: 2_000, burst: 3 }), true);
  const st2 = (await c.stats(q)).find((s) => s.queue === q);
  assert.equal(st2?.maxRunning, 5);
  assert.equal(st2?.rateMilli, 2_000);
  assert.equal(st2?.burst, 3);
  assert.equal(st2?.maxRunningPerKey, 1, "an unset field keeps the queue's value");
  // The server asks for the depth with a keep rule, and names the field.
  await assert.rejects(c.setQueueLimits(q, { perKeyPending: "keep-newest" }), (e) => e instanceof InvalidArgumentError && e.field === "per_key_pending_depth");
  await assert.rejects(c.setQueueLimits(q, { order: "FAIR" as never }), (e) => e instanceof InvalidArgumentError && e.field === "order");
});

test("per-key limit 1 in fair order: a claim takes one task per key, then the keys take turns", async () => {
  const q = queueName("fair-rr");
  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), true);
  // All of a's tasks first: in FIFO order a claim would take them first.
  await enqueueKeyed(q, "a", 3);
  await enqueueKeyed(q, "b", 3);

  const first = await c.claim(q, { max: 10, leaseMs: 60_000 });
  assert.deepEqual(keysOf(first), ["a", "b"], "one task of each key, though six are pending");
  assert.equal((await c.claim(q, { max: 10, leaseMs: 60_000 })).length, 0, "both keys are at their limit");
  for (const t of first) assert.equal((await c.complete(t)).error, undefined);

  // One at a time, each finished before the next claim: every key has
  // nothing running, so the key served longest ago goes next.
  const order: string[] = [];
  for (let i = 0; i < 4; i++) {
    const [t] = await c.claim(q, { max: 1, leaseMs: 60_000 });
    assert.ok(t, `claim ${i} found a task`);
    order.push(t.key);
    assert.equal((await c.complete(t)).error, undefined);
  }
  assert.deepEqual(order, ["a", "b", "a", "b"]);
  assert.equal((await c.claim(q, { max: 10 })).length, 0, "all six were claimed");
});

test("setKeyLimit raises one key's limit; listKeys reports each key's backlog and running", async () => {
  const q = queueName("fair-keys");
  const plain = queueName("fair-plain");
  await c.enqueue(plain, "no rule");
  const none = await c.listKeys(plain);
  assert.equal(none.keyed, false);
  assert.deepEqual([none.byBacklog.length, none.byRunning.length], [0, 0]);

  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), true);
  await enqueueKeyed(q, "acme", 4);
  await enqueueKeyed(q, "globex", 3);
  await c.enqueue(q, "keyless"); // its own key: claimed, never listed
  assert.deepEqual(keysOf(await c.claim(q, { max: 10, leaseMs: 60_000 })), ["", "acme", "globex"]);

  assert.equal(await c.setKeyLimit(q, "acme", { maxRunning: 3 }), true);
  assert.equal(await c.setKeyLimit(q, "acme", { maxRunning: 3 }), false, "already so");
  const more = await c.claim(q, { max: 10, leaseMs: 60_000 });
  assert.deepEqual(keysOf(more), ["acme", "acme"], "acme up to its own limit of 3, globex still at 1");
  assert.equal((await c.claim(q, { max: 10 })).length, 0);

  const ks = await c.listKeys(q, { limit: 10 });
  assert.equal(ks.keyed, true);
  assert.equal(ks.keys, 2);
  const row = (k: { key: string; pending: number; running: number; maxRunning: number; weight: number }) => [k.key, k.pending, k.running, k.maxRunning, k.weight];
  assert.deepEqual(ks.byBacklog.map(row), [["globex", 2, 1, 1, 1], ["acme", 1, 3, 3, 1]]);
  assert.deepEqual(ks.byRunning.map(row), [["acme", 1, 3, 3, 1], ["globex", 2, 1, 1, 1]]);
  assert.deepEqual(Buffer.from(ks.byBacklog[0]!.keyBytes), Buffer.from("globex"));
  assert.equal((await c.listKeys(q, { limit: 1 })).byBacklog.length, 1, "limit bounds each list");

  // A listed key's bytes name it exactly; weight is its share of the fair
  // order, and 0 clears acme's override back to the queue's limit.
  assert.equal(await c.setKeyLimit(q, ks.byBacklog[0]!.keyBytes, { weight: 2 }), true);
  assert.equal(await c.setKeyLimit(q, "acme", { maxRunning: 0 }), true);
  const later = await c.listKeys(q);
  assert.deepEqual(later.byBacklog.map(row), [["globex", 2, 1, 1, 2], ["acme", 1, 3, 1, 1]]);
  await assert.rejects(c.setKeyLimit(q, "acme", {}), (e) => e instanceof InvalidArgumentError && e.field === "max_running");
});

test("stats reports counts as numbers and the queue's rules in setQueueLimits' spellings, which write back as they are", async () => {
  const q = queueName("fair-stats");
  const set = { maxRunning: 4, rateMilli: 1_500, burst: 2, maxRunningPerKey: 2, order: "fair", perKeyPending: "keep-newest", perKeyPendingDepth: 3 } as const;
  assert.equal(await c.setQueueLimits(q, set), true);
  const before = Date.now();
  await enqueueKeyed(q, "acme", 2);
  await c.enqueue(q, "later", { delayMs: 3_600_000 });

  const st = await statsOf(q);
  assert.deepEqual(
    [st.pending, st.delayed, st.running, st.dead, st.completed, st.waiting, st.paused],
    [2, 1, 0, 0, 0, 0, false],
    "counts are numbers, not bigints",
  );
  assert.deepEqual(limitsOf(st), set);
  assert.equal(typeof st.tokensMilli, "number");
  assert.equal(typeof st.tenantRunning, "number");
  assert.equal(typeof st.tenantMaxRunning, "number");
  assert.ok(st.oldestPendingAt instanceof Date, `oldestPendingAt ${st.oldestPendingAt}`);
  assert.ok(Math.abs(st.oldestPendingAt.getTime() - before) < 60_000, `oldestPendingAt ${st.oldestPendingAt.toISOString()} is the head task's enqueue time`);
  // Totals need feature level 5, long latched on a cluster at level 16.
  assert.equal(st.totals?.enqueued, 3);
  assert.equal(st.totals?.claimed, 0);
  assert.equal(st.raw.pending, 2n, "raw keeps the wire record");

  // What stats read, given back: every value is already so.
  assert.equal(await c.setQueueLimits(q, limitsOf(st)), false);
  // And copied to another queue, it reads back the same.
  const copy = queueName("fair-stats-copy");
  await c.enqueue(copy, "listed in stats");
  assert.equal(await c.setQueueLimits(copy, limitsOf(st)), true);
  assert.deepEqual(limitsOf(await statsOf(copy)), set);

  // A queue nobody configured: FIFO, no debounce, and no head task to date.
  const plain = queueName("fair-stats-plain");
  await c.enqueue(plain, "delayed only", { delayMs: 3_600_000 });
  const p = await statsOf(plain);
  assert.deepEqual([p.order, p.perKeyPending, p.maxRunning, p.rateMilli, p.pending, p.delayed], ["fifo", "all", 0, 0, 0, 1]);
  assert.equal(p.oldestPendingAt, undefined);
  assert.equal(await c.setQueueLimits(plain, limitsOf(p)), false, "the defaults write back unchanged");
});
