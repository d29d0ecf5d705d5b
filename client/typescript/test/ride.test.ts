import { test, after } from "node:test";
import assert from "node:assert/strict";
import type { Conn } from "../src/conn.js";
import { QueueClient, type SubmitBatchRequest } from "../src/gen/docketv1/api.js";
import { Code } from "../src/gen/docketv1/command.js";
import { Task } from "../src/gen/docketv1/task.js";
import { DeadlineError, DocketError, InvalidArgumentError, OutcomeUnknownError, PermissionDeniedError, UnavailableError, Worker } from "../src/index.js";
import { submitBatchRpc, submitter, type SubmitItem } from "../src/submitshare.js";
import { newClient, queueName, until } from "./helpers.js";

const c = newClient();
after(() => c.close());

/**
 * Counts the Queue RPCs that name queue, by wrapping the generated stub's
 * methods: what the server is asked, whatever path in the client sent it.
 * Submits name no queue and are counted all; rides are SubmitBatches with
 * a claim. seen runs before each RPC goes out.
 */
function countRpcs(queue: string, seen: (method: string, req: any) => void = () => {}) {
  const n = { claims: 0, submits: 0, submitBatches: 0, rides: 0 };
  const proto = QueueClient.prototype as unknown as Record<string, (...a: any[]) => unknown>;
  const names = ["claim", "claimBatch", "submit", "submitBatch"] as const;
  const orig = Object.fromEntries(names.map((m) => [m, proto[m]!]));
  const count = (m: string, req: any) => {
    if (m === "claim" && req.queue === queue) n.claims++;
    if (m === "claimBatch" && req.items.some((it: any) => it.queue === queue)) n.claims++;
    if (m === "submit") n.submits++;
    if (m === "submitBatch") n[req.claim ? "rides" : "submitBatches"]++;
  };
  for (const m of names) {
    proto[m] = function (this: unknown, req: unknown, ...rest: unknown[]) {
      count(m, req);
      seen(m, req);
      return orig[m]!.call(this, req, ...rest);
    };
  }
  return { n, restore: () => names.forEach((m) => (proto[m] = orig[m]!)) };
}

test("a worker's reports claim its next tasks: a backlog drains with few Claim RPCs", async () => {
  const q = queueName("ride");
  const n = 400;
  const enq = await c.enqueueBatch(Array.from({ length: n }, (_, i) => ({ queue: q, payload: i })));
  assert.ok(enq.every((r) => !r.error));
  const rpcs = countRpcs(q);
  const seen = new Map<string, number>();
  const w = new Worker<number, number>(c, q, async (p, t) => {
    seen.set(t.id, (seen.get(t.id) ?? 0) + 1);
    return p;
  }, { concurrency: 4, leaseMs: 10_000, waitMs: 1_000 });
  try {
    await until("every task to complete", async () => (await c.stats(q))[0]?.completed === n, 45_000, 100);
  } finally {
    await w.close();
    rpcs.restore();
  }
  assert.equal(seen.size, n);
  for (const [id, k] of seen) assert.equal(k, 1, `task ${id} ran ${k} times`);
  assert.equal(w.processed, n);
  console.log(`${n} tasks: ${rpcs.n.claims} Claim or ClaimBatch RPCs, ${rpcs.n.rides} SubmitBatch RPCs with a claim, ${rpcs.n.submits + rpcs.n.submitBatches} without`);
  assert.ok(rpcs.n.claims <= n / 10, `${rpcs.n.claims} Claim RPCs for ${n} tasks: the reports did not claim the next tasks`);
  const [st] = await c.stats(q);
  assert.equal(st?.running, 0);
  assert.equal(st?.pending, 0);
});

test("submitAndClaim reports tasks and claims the next ones in one call; those carry fences and complete", async () => {
  const q = queueName("sac");
  const ids = (await c.enqueueBatch(Array.from({ length: 4 }, (_, i) => ({ queue: q, payload: i })))).map((r) => r.id);
  const held = await c.claim(q, { max: 2, leaseMs: 10_000 });
  assert.equal(held.length, 2);
  const r = await c.submitAndClaim(q, [
    { task: held[0]!, result: c.codec.encode("one") },
    { task: held[1]!, outcome: "failed", reason: "no good" },
  ], { leaseMs: 10_000 });
  assert.deepEqual(r.answers, [{ alreadyDone: false, error: undefined }, { alreadyDone: false, error: undefined }]);
  assert.equal(r.tasks.length, 2, "one task per report by default");
  for (const t of r.tasks) {
    assert.equal(t.state, "running");
    assert.ok(t.fence > held[0]!.fence && t.fence > held[1]!.fence, `fence ${t.fence} is the new entry's`);
  }
  assert.deepEqual(new Set([...held, ...r.tasks].map((t) => t.id)), new Set(ids));
  for (const t of r.tasks) assert.deepEqual(await c.complete(t, c.codec.encode(t.id)), { alreadyDone: false, error: undefined });
  const first = await c.getTask(held[0]!.id);
  assert.equal(first.state, "completed");
  assert.equal(c.codec.decode(first.result), "one");
  const second = await c.getTask(held[1]!.id);
  assert.equal(second.state, "failed");
  assert.equal(second.lastError, "no good");
  for (const t of r.tasks) assert.equal((await c.getTask(t.id)).state, "completed");
  // A repeat answers alreadyDone, and the empty queue gives nothing.
  const again = await c.submitAndClaim(q, [{ task: held[0]!, result: c.codec.encode("one") }]);
  assert.deepEqual(again.answers, [{ alreadyDone: true, error: undefined }]);
  assert.equal(again.tasks.length, 0);
});

test("submitAndClaim's refused claim fails the call, and its report is not applied", async () => {
  const q = queueName("sacbad");
  await c.enqueue(q, "x");
  const [t] = await c.claim(q, { leaseMs: 10_000 });
  await assert.rejects(c.submitAndClaim("", [{ task: t! }]), (e) => e instanceof InvalidArgumentError && e.field === "claim.queue");
  assert.equal((await c.getTask(t!.id)).state, "running");
  await assert.rejects(c.submitAndClaim(q, []), InvalidArgumentError);
});

test("a worker's report whose claim the server refuses lands without the claim, alone or shared", async () => {
  const q = queueName("refused");
  const ids = (await c.enqueueBatch(Array.from({ length: 3 }, (_, i) => ({ queue: q, payload: i })))).map((r) => r.id);
  const held = await c.claim(q, { max: 3, leaseMs: 10_000 });
  assert.equal(held.length, 3);
  // A claim of no queue: refused, claim.queue, before anything applies.
  const ride = { queue: "", leaseMs: 10_000 };
  const rpcs = countRpcs(q);
  try {
    const landed = (r: { alreadyDone: boolean; error?: unknown; next?: unknown }) => !r.alreadyDone && r.error === undefined && r.next === undefined;
    const alone = await c.submitRiding(held[0]!, "completed", { ride });
    assert.ok(landed(alone), `answer ${JSON.stringify(alone)}`);
    assert.deepEqual(rpcs.n, { claims: 0, submits: 1, submitBatches: 0, rides: 1 }, "the refused ride, then the Submit alone");
    // Two reports in one turn share one SubmitBatch, and then one without the claim.
    const shared = await Promise.all(held.slice(1).map((t) => c.submitRiding(t, "completed", { ride })));
    assert.ok(shared.every(landed), `answers ${JSON.stringify(shared)}`);
    assert.deepEqual(rpcs.n, { claims: 0, submits: 1, submitBatches: 1, rides: 2 });
  } finally {
    rpcs.restore();
  }
  for (const id of ids) assert.equal((await c.getTask(id)).state, "completed");
});

test("a task a report claimed as the worker began to stop is given back without spending an attempt", async () => {
  const q = queueName("giveback");
  // b has one attempt: a give-back that spent it would dead-letter b.
  const [a, b] = (await c.enqueueBatch([{ queue: q, payload: "a", priority: 9 }, { queue: q, payload: "b", maxAttempts: 1 }])).map((r) => r.id);
  const ran: string[] = [];
  let w!: Worker<string, string>;
  let closing: Promise<void> | undefined;
  // The worker stops while its report's ride is in flight: the task the
  // ride brings arrives after the stop.
  const rpcs = countRpcs(q, (m, req) => {
    if (m === "submitBatch" && req.claim && !closing) closing = w.close();
  });
  try {
    w = new Worker<string, string>(c, q, async (p, t) => {
      ran.push(t.id);
      return p;
    }, { concurrency: 1, leaseMs: 10_000, waitMs: 1_000 });
    await until("the worker to stop", () => closing !== undefined, 15_000);
    await closing;
  } finally {
    rpcs.restore();
    await w.close();
  }
  assert.deepEqual(ran, [a]);
  assert.equal(rpcs.n.rides, 1);
  assert.equal((await c.getTask(a!)).state, "completed");
  const back = await c.getTask(b!);
  assert.equal(back.state, "pending", "given back, not left to its lease");
  assert.equal(back.attempts, 0, "attempts the give-back spent");
});

// The classification, with a stand-in for the connection: which failures
// of a SubmitBatch with a claim send the Submits again without it.
function fakeConn(fail: (req: SubmitBatchRequest) => unknown) {
  const sent: string[] = [];
  const conn = {
    invoke: async (_kind: string, rpc: unknown, req: any) => {
      if (rpc !== submitBatchRpc) {
        sent.push("submit");
        return { alreadyDone: false };
      }
      sent.push(req.claim ? `ride of ${req.claim.maxTasks}` : "submitBatch");
      const e = req.claim && fail(req);
      if (e) throw e;
      const tasks = req.claim ? Array.from({ length: req.claim.maxTasks }, (_, i) => Task.fromPartial({ id: `next${i}`, fence: 100n + BigInt(i) })) : [];
      return { items: req.items.map((it: any) => ({ taskId: it.taskId, code: Code.CODE_OK })), tasks };
    },
  };
  return { conn: conn as unknown as Conn, sent };
}

const item = (id: string, ride?: Partial<{ queue: string; workerId: string }>): SubmitItem => ({
  req: { taskId: id, fence: 1n, outcome: 1, result: Buffer.alloc(0), error: "", tenant: "" },
  ride: ride && { queue: "q", tenant: "", workerId: "w", leaseNs: 1_000_000_000n, maxTasks: 1, waitNs: 0n, ...ride },
});

test("a refused claim resends the Submit alone; an unknown outcome does not", async () => {
  const refusals = [
    new InvalidArgumentError("wait", { field: "claim.wait_ns" }),
    new PermissionDeniedError("other tenant"),
    new UnavailableError("no leader"),
    new DocketError("failed precondition", { code: 9 }),
  ];
  for (const e of refusals) {
    const { conn, sent } = fakeConn(() => e);
    const [a] = await submitter(conn, 0).send([item("t", {})]);
    assert.deepEqual(a, { alreadyDone: false }, e.message);
    assert.deepEqual(sent, ["ride of 1", "submit"], e.message);
  }
  for (const e of [new OutcomeUnknownError("lost"), new DeadlineError("deadline")]) {
    const { conn, sent } = fakeConn(() => e);
    await assert.rejects(submitter(conn, 0).send([item("t", {})]), e.constructor as typeof DocketError);
    assert.deepEqual(sent, ["ride of 1"], "the submit may have applied: not sent again");
  }
  // A server without SubmitBatch is not asked again for a while.
  const old = fakeConn(() => new DocketError("unimplemented", { code: 12 }));
  const s = submitter(old.conn, 0);
  for (const id of ["a", "b"]) assert.equal((await s.send([item(id, {})]))[0]!.error, undefined);
  assert.deepEqual(old.sent, ["ride of 1", "submit", "submit"]);
});

test("shared reports merge rides of one claim, hand out its tasks in order, and fall back whole", async () => {
  const ok = fakeConn(() => undefined);
  const s = submitter(ok.conn, 2);
  const out = await Promise.all([s.send([item("a", {})]), s.send([item("b")]), s.send([item("c", { workerId: "other" })]), s.send([item("d", {})])]);
  assert.deepEqual(ok.sent, ["ride of 2"]);
  assert.deepEqual(out.map(([r]) => r!.next?.id), ["next0", undefined, undefined, "next1"]);
  assert.equal(out[3]![0]!.next?.fence, 101n);

  const refused = fakeConn(() => new DocketError("claim refused", { code: 9 }));
  const r = submitter(refused.conn, 2);
  const got = await Promise.all([r.send([item("a", {})]), r.send([item("b", {})])]);
  assert.deepEqual(refused.sent, ["ride of 2", "submitBatch"]);
  assert.deepEqual(got.map(([x]) => x), [{ alreadyDone: false, error: undefined }, { alreadyDone: false, error: undefined }]);
});
