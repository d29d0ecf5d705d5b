// Fair queues against the real cluster: the queue's per-key limit and
// order, one key's override, and the per-key counts ListKeys reports.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { FeatureDisabledError, InvalidArgumentError, type TaskInfo } from "../src/index.js";
import { QueueOrder } from "../src/gen/docketv1/task.js";
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

test("setQueueLimits makes a queue fair with a per-key limit; a repeat answers unchanged", async () => {
  const q = queueName("fair-cfg");
  await c.enqueue(q, "listed in stats");
  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), true);
  assert.equal(await c.setQueueLimits(q, { maxRunningPerKey: 1, order: "fair" }), false, "every value was already so");
  const st = (await c.stats(q)).find((s) => s.queue === q);
  assert.equal(st?.maxRunningPerKey, 1);
  assert.equal(st?.order, QueueOrder.QUEUE_ORDER_FAIR);
  assert.equal(await c.setQueueLimits(q, { maxRunning: 5, rateMilli: 2_000, burst: 3 }), true);
  const st2 = (await c.stats(q)).find((s) => s.queue === q);
  assert.equal(st2?.maxRunning, 5);
  assert.equal(st2?.rateMilli, 2_000n);
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
