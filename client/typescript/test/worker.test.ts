import { test, after } from "node:test";
import assert from "node:assert/strict";
import { CancelledError, LeaseLostError, permanent, rawCodec, Worker, type TaskContext } from "../src/index.js";
import { newClient, queueName, until } from "./helpers.js";

const c = newClient();
after(() => c.close());

test("a typed worker round trip: payload in, result out", async () => {
  const q = queueName("rt");
  const id = await c.enqueue(q, { a: 20, b: 22 });
  const w = new Worker<{ a: number; b: number }, { sum: number }>(c, q, async (p) => ({ sum: p.a + p.b }), { leaseMs: 10_000 });
  try {
    const t = await c.waitResult(id, { timeoutMs: 15_000 });
    assert.equal(t.state, "completed");
    assert.deepEqual(c.codec.decode(t.result), { sum: 42 });
  } finally {
    await w.close();
  }
});

test("a throw is nacked and retried; permanent fails for good", async () => {
  const q = queueName("retry");
  const flaky = await c.enqueue(q, { kind: "flaky" }, { maxAttempts: 3 });
  const doomed = await c.enqueue(q, { kind: "doomed" }, { maxAttempts: 3 });
  const w = new Worker<{ kind: string }, string>(c, q, async (p, t) => {
    if (p.kind === "doomed") throw permanent(new Error("never works"));
    if (t.attempt === 1) throw new Error("first try fails");
    return `ok on ${t.attempt}`;
  }, { concurrency: 2, leaseMs: 10_000 });
  try {
    const f = await c.waitResult(flaky, { timeoutMs: 15_000 });
    assert.equal(f.state, "completed");
    assert.equal(c.codec.decode(f.result), "ok on 2");
    assert.equal(f.attempts, 1);
    const d = await c.waitResult(doomed, { timeoutMs: 15_000 });
    assert.equal(d.state, "failed");
    assert.equal(d.lastError, "never works");
  } finally {
    await w.close();
  }
});

test("cancel of a running task aborts the handler's signal", async () => {
  const q = queueName("cancelrun");
  const id = await c.enqueue(q, "long");
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  let reason: unknown;
  const w = new Worker(c, q, async (_p, t: TaskContext) => {
    started();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("never aborted")), 20_000);
      t.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reason = t.signal.reason;
        reject(t.signal.reason);
      }, { once: true });
    });
  }, { leaseMs: 3_000 });
  try {
    await running;
    const r = await c.cancel(id);
    assert.equal(r.cancelRequested, true);
    const t = await c.waitResult(id, { timeoutMs: 15_000 });
    assert.ok(reason instanceof CancelledError, `handler saw ${reason}`);
    assert.equal(t.state, "cancelled");
  } finally {
    await w.close();
  }
});

test("close drains: no new claims, running handlers finish and report", async () => {
  const q = queueName("close");
  const ids = (await c.enqueueBatch(Array.from({ length: 8 }, (_, i) => ({ queue: q, payload: i })))).map((r) => r.id);
  const started = new Set<string>();
  const finished = new Set<string>();
  const w = new Worker<number, number>(c, q, async (p, t) => {
    started.add(t.id);
    await new Promise((r) => setTimeout(r, 400));
    finished.add(t.id);
    return p * 2;
  }, { concurrency: 3, leaseMs: 10_000 });
  await until("three handlers to run", () => started.size >= 3);
  await w.close();
  assert.equal(w.active, 0);
  assert.deepEqual([...finished].sort(), [...started].sort(), "every started handler finished");
  for (const id of ids) {
    const t = await c.getTask(id);
    if (started.has(id)) assert.equal(t.state, "completed", `task ${id}`);
    else assert.equal(t.state, "pending", `task ${id} was claimed after close`);
  }
  assert.ok(started.size < ids.length, "close stopped claiming");
});

test("close past its grace aborts the handler and nacks its task", async () => {
  const q = queueName("grace");
  const id = await c.enqueue(q, "stubborn");
  let running = false;
  const w = new Worker(c, q, async (_p, t) => {
    running = true;
    await new Promise((_r, reject) => t.signal.addEventListener("abort", () => reject(new Error("aborted at close")), { once: true }));
  }, { leaseMs: 10_000, shutdownTimeoutMs: 200 });
  await until("the handler to run", () => running);
  await w.close();
  const t = await c.getTask(id);
  assert.equal(t.state, "pending");
  assert.equal(t.lastError, "aborted at close");
});

test("a lease lost by the local clock aborts the handler", async () => {
  const q = queueName("lost");
  await c.enqueue(q, "blocked");
  let reason: unknown;
  let settled = false;
  const w = new Worker(c, q, async (_p, t) => {
    // Block the event loop past the lease: no heartbeat can go out.
    const until = Date.now() + 1_300;
    while (Date.now() < until) {}
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      t.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reason = t.signal.reason;
        resolve();
      }, { once: true });
      if (t.signal.aborted) {
        clearTimeout(timer);
        reason = t.signal.reason;
        resolve();
      }
    });
    settled = true;
    throw reason ?? new Error("never aborted");
  }, { leaseMs: 1_000 });
  try {
    await until("the handler to end", () => settled, 15_000);
    assert.ok(reason instanceof LeaseLostError, `handler saw ${reason}`);
  } finally {
    await w.close();
  }
});

test("heartbeats keep a lease alive past its length", async () => {
  const q = queueName("beats");
  const id = await c.enqueue(q, "long but alive");
  let aborted = false;
  const w = new Worker(c, q, async (_p, t) => {
    // Four leases long: only heartbeats every lease/3 keep the claim.
    await new Promise((r) => setTimeout(r, 4_000));
    aborted = t.signal.aborted;
    return "done";
  }, { leaseMs: 1_000 });
  try {
    const t = await c.waitResult(id, { timeoutMs: 20_000 });
    assert.equal(t.state, "completed");
    assert.equal(t.attempts, 0, "the lease never expired");
    assert.equal(t.raw.claims, 1);
    assert.equal(aborted, false);
  } finally {
    await w.close();
  }
});

test("a payload that does not decode is nacked, never handed to the handler", async () => {
  const q = queueName("badpayload");
  const id = await c.enqueue(q, Buffer.from("{not json"), { codec: rawCodec, maxAttempts: 1 });
  let called = false;
  const w = new Worker<{ x: number }, void>(c, q, async () => {
    called = true;
  }, { leaseMs: 10_000 });
  try {
    const t = await c.waitResult(id, { timeoutMs: 15_000 });
    assert.equal(t.state, "dead");
    assert.match(t.lastError, /bad payload/);
    assert.equal(called, false);
  } finally {
    await w.close();
  }
});
