import { test, after } from "node:test";
import assert from "node:assert/strict";
import { StaleFenceError, WrongStateError } from "../src/index.js";
import { newClient, queueName, until } from "./helpers.js";

const c = newClient();
after(() => c.close());

test("enqueue carries every task option, and a default idempotency key", async () => {
  const q = queueName("opts");
  const parent = await c.enqueue(q, { step: 1 });
  const runAt = new Date(Date.now() + 3_600_000);
  const id = await c.enqueue(q, { step: 2 }, { priority: 7, runAt, maxAttempts: 3, retentionMs: 60_000, idempotencyKey: "opts-key", parents: [parent], execTimeoutMs: 5_000, taskKey: "customer-7" });
  const t = await c.getTask(id);
  assert.equal(t.queue, q);
  assert.equal(t.key, "customer-7");
  assert.equal(t.priority, 7);
  assert.equal(t.maxAttempts, 3);
  assert.equal(t.idempotencyKey, "opts-key");
  assert.deepEqual(t.parents, [parent]);
  assert.equal(t.raw.retentionNs, 60_000_000_000n);
  assert.equal(t.raw.timeoutNs, 5_000_000_000n);
  assert.equal(t.state, "waiting");
  const p = await c.getTask(parent);
  assert.notEqual(p.idempotencyKey, "", "every enqueue carries a key");
  const d = await c.getTask(await c.enqueue(q, 1, { delayMs: 3_600_000 }));
  assert.equal(d.state, "delayed");
  assert.ok(d.visibleAt && d.visibleAt.getTime() > Date.now() + 3_000_000);
});

test("execTimeoutMs is stored on the task and leaves the call its deadline; a call's timeoutMs is not stored", async () => {
  const q = queueName("exec");
  // A bound no call could meet: as the call's deadline it would fail the
  // enqueue, as the task's it is only stored.
  const tiny = await c.enqueue(q, "bounded", { execTimeoutMs: 1 });
  assert.equal((await c.getTask(tiny)).raw.timeoutNs, 1_000_000n);
  const bounded = await c.enqueue(q, "bounded", { execTimeoutMs: 1_500, timeoutMs: 10_000 });
  assert.equal((await c.getTask(bounded)).raw.timeoutNs, 1_500_000_000n);
  const plain = await c.enqueue(q, "call deadline only", { timeoutMs: 10_000 });
  assert.equal((await c.getTask(plain)).raw.timeoutNs, 0n);
  const [b, u] = await c.enqueueBatch([{ queue: q, payload: "batched", execTimeoutMs: 2_500 }, { queue: q, payload: "unbounded" }], { timeoutMs: 10_000 });
  assert.equal((await c.getTask(b!.id)).raw.timeoutNs, 2_500_000_000n);
  assert.equal((await c.getTask(u!.id)).raw.timeoutNs, 0n);
});

test("enqueueBatch stores every task and answers in order", async () => {
  const q = queueName("batch");
  const res = await c.enqueueBatch(Array.from({ length: 100 }, (_, i) => ({ queue: q, payload: { i } })));
  assert.equal(res.length, 100);
  assert.equal(new Set(res.map((r) => r.id)).size, 100);
  assert.ok(res.every((r) => !r.error && !r.duplicate));
  const st = await c.stats(q);
  assert.equal(st.find((s) => s.queue === q)?.pending, 100);
  const t = await c.getTask(res[42]!.id);
  assert.deepEqual(c.codec.decode(t.payload), { i: 42 });
});

test("an enqueue retried with its key is applied once", async () => {
  const q = queueName("idem");
  const first = await c.enqueueBatch([{ queue: q, payload: "x", idempotencyKey: "k1" }]);
  const again = await c.enqueueBatch([{ queue: q, payload: "x", idempotencyKey: "k1" }]);
  assert.equal(again[0]!.id, first[0]!.id);
  assert.equal(again[0]!.duplicate, true);
  const st = await c.stats(q);
  assert.equal(st.find((s) => s.queue === q)?.pending, 1);
});

test("claims take the highest priority first, FIFO within one", async () => {
  const q = queueName("prio");
  const ids = [];
  for (const p of [0, 9, 5, 9]) ids.push(await c.enqueue(q, p, { priority: p }));
  const got: string[] = [];
  for (let i = 0; i < 4; i++) {
    const [t] = await c.claim(q, { max: 1, leaseMs: 30_000 });
    got.push(t!.id);
  }
  assert.deepEqual(got, [ids[1], ids[3], ids[2], ids[0]]);
});

test("a delayed task becomes claimable after its delay, not before", async () => {
  const q = queueName("delay");
  const start = Date.now();
  const id = await c.enqueue(q, "later", { delayMs: 1_500 });
  assert.equal((await c.claim(q, { max: 1 })).length, 0);
  let claimedAt = 0;
  await until("the delayed task to be claimable", async () => {
    const ts = await c.claim(q, { max: 1, waitMs: 1_000 });
    if (ts.length === 0) return false;
    assert.equal(ts[0]!.id, id);
    claimedAt = Date.now();
    return true;
  }, 15_000);
  assert.ok(claimedAt - start >= 1_400, `claimed after ${claimedAt - start} ms`);
});

test("a stale fence is refused; the right one completes once", async () => {
  const q = queueName("fence");
  const id = await c.enqueue(q, "f");
  const [t1] = await c.claim(q, { max: 1, leaseMs: 30_000 });
  assert.equal(t1!.id, id);
  assert.ok(t1!.fence > 0n);
  assert.equal(await c.nack(t1!, { reason: "give it back" }), "pending");
  const [t2] = await c.claim(q, { max: 1, leaseMs: 30_000 });
  assert.ok(t2!.fence > t1!.fence, "fences rise with each claim");
  const stale = await c.complete(t1!, Buffer.from("old"));
  assert.ok(stale.error instanceof StaleFenceError, `got ${stale.error}`);
  await assert.rejects(c.nack(t1!), StaleFenceError);
  const ok = await c.complete(t2!, Buffer.from("new"));
  assert.equal(ok.error, undefined);
  const again = await c.complete(t2!, Buffer.from("new"));
  assert.equal(again.alreadyDone, true);
  const done = await c.waitResult(id, { timeoutMs: 5_000 });
  assert.equal(done.state, "completed");
  assert.equal(Buffer.from(done.result).toString(), "new");
});

test("snooze gives a claimed task back for later without spending an attempt; a stale fence is refused", async () => {
  const q = queueName("snooze");
  const id = await c.enqueue(q, "s", { maxAttempts: 1 });
  const [t1] = await c.claim(q, { max: 1, leaseMs: 30_000 });
  assert.equal(t1!.id, id);
  assert.equal(await c.snooze(t1!, { delayMs: 60_000 }), "delayed");
  await assert.rejects(c.snooze(t1!), StaleFenceError);
  const later = await c.getTask(id);
  assert.equal(later.state, "delayed");
  assert.equal(later.attempts, 0, "attempts a snooze spent");
  assert.equal((await c.claim(q, { max: 1 })).length, 0, "a snoozed task waits out its delay");
});

test("cancel ends a waiting task", async () => {
  const q = queueName("cancel");
  const id = await c.enqueue(q, "c");
  const r = await c.cancel(id);
  assert.equal(r.cancelRequested, false);
  assert.equal(r.state, "cancelled");
  assert.equal((await c.getTask(id)).state, "cancelled");
});

test("operator calls: pause and resume, stats, dead letters, cluster status", async () => {
  const q = queueName("ops");
  assert.equal(await c.pauseQueue(q), true);
  assert.equal(await c.pauseQueue(q), false);
  const id = await c.enqueue(q, "o", { maxAttempts: 1 });
  assert.equal((await c.claim(q, { max: 1 })).length, 0, "a paused queue gives nothing");
  assert.equal((await c.stats(q)).find((s) => s.queue === q)?.paused, true);
  assert.equal(await c.resumeQueue(q), true);
  const [t] = await c.claim(q, { max: 1 });
  assert.equal(t!.id, id);
  assert.equal(await c.nack(t!, { reason: "boom" }), "dead");
  const dead = await c.listDead(q);
  assert.deepEqual(dead.tasks.map((d) => d.id), [id]);
  assert.equal(dead.tasks[0]!.lastError, "boom");
  const rq = await c.requeueDead({ taskId: id });
  assert.equal(rq[0]!.error, undefined);
  assert.equal((await c.getTask(id)).state, "pending");
  await assert.rejects(c.requeueDead({ taskId: id }).then((r) => { if (r[0]!.error) throw r[0]!.error; }), WrongStateError);
  const s = await c.clusterStatus();
  assert.ok(s.leaderAddr.startsWith("127.0.0.1:"));
  assert.equal(s.servers.length, 3);
  assert.equal(s.servers.filter((x) => x.leader).length, 1);
});

test("a graph in one enqueueBatch: a child waits for its parent by index", async () => {
  const q = queueName("dag");
  const [p, ch] = await c.enqueueBatch([
    { queue: q, payload: "parent" },
    { queue: q, payload: "child", parentIndexes: [0] },
  ]);
  assert.equal(p!.error, undefined);
  assert.equal(ch!.error, undefined);
  const child = await c.getTask(ch!.id);
  assert.equal(child.state, "waiting");
  assert.deepEqual(child.parents, [p!.id]);
  const [t] = await c.claim(q, { max: 5 });
  assert.equal(t!.id, p!.id, "only the parent is claimable");
  await c.complete(t!);
  await until("the child to be pending", async () => (await c.getTask(ch!.id)).state === "pending");
});
