// Leader following and the retry rules against in-process fake nodes, where
// the answers can be chosen: a NOT_LEADER hint is followed, an enqueue is
// resent after LEADERSHIP_LOST with the same idempotency key, a nack is not.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Server, ServerCredentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { Client, InvalidArgumentError, OutcomeUnknownError, UnavailableError } from "../src/index.js";
import { ClusterService, QueueService, StatusResponse, EnqueueResponse, NackResponse, ClaimResponse, ClaimBatchResponse, type EnqueueRequest, type ClaimRequest, type ClaimBatchRequest } from "../src/gen/docketv1/api.js";
import { Code } from "../src/gen/docketv1/command.js";
import { ErrorInfo, Status } from "../src/gen/google/rpc/status.js";

type Answer = (call: string) => ServiceError | null;

function rpcError(code: number, reason: string, leader?: string): ServiceError {
  const md = new Metadata();
  const info = ErrorInfo.encode({ reason, domain: "docket.dev", metadata: leader ? { leader } : {} }).finish();
  md.set("grpc-status-details-bin", Buffer.from(Status.encode({ code, message: reason, details: [{ typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from(info) }] }).finish()));
  return Object.assign(new Error(reason), { code, details: reason, metadata: md });
}

interface Fake {
  addr: string;
  calls: string[];
  keys: string[];
  /** Each Enqueue RPC: its tasks' timeout_ns, and the time its deadline left when it arrived. */
  enqueues: { timeoutNs: bigint[]; budgetMs: number }[];
  answer: Answer;
  leader: string;
  server: Server;
}

async function fake(): Promise<Fake> {
  const server = new Server();
  const f: Fake = { addr: "", calls: [], keys: [], enqueues: [], answer: () => null, leader: "", server };
  server.addService(ClusterService, {
    status: (_c: unknown, cb: (e: ServiceError | null, r?: StatusResponse) => void) => cb(null, StatusResponse.fromPartial({ leaderGrpcAddr: f.leader, state: "Follower" })),
  } as any);
  server.addService(QueueService, {
    enqueue: (c: { request: EnqueueRequest; getDeadline(): Date | number }, cb: (e: ServiceError | null, r?: EnqueueResponse) => void) => {
      f.calls.push("enqueue");
      f.keys.push(c.request.tasks[0]!.idempotencyKey);
      f.enqueues.push({ timeoutNs: c.request.tasks.map((t) => t.timeoutNs), budgetMs: Number(c.getDeadline()) - Date.now() });
      const e = f.answer("enqueue");
      if (e) return cb(e);
      cb(null, EnqueueResponse.fromPartial({ items: c.request.tasks.map((_, i) => ({ code: Code.CODE_OK, taskId: `t${i + 1}` })) }));
    },
    claim: (c: { request: ClaimRequest }, cb: (e: ServiceError | null, r?: ClaimResponse) => void) => {
      f.calls.push(c.request.waitNs > 0n ? "claim+wait" : "claim");
      // Slow enough that concurrent callers find both slots taken.
      setTimeout(() => cb(null, ClaimResponse.fromPartial({ tasks: [{ id: `c${f.calls.length}` }] })), 50);
    },
    claimBatch: (c: { request: ClaimBatchRequest }, cb: (e: ServiceError | null, r?: ClaimBatchResponse) => void) => {
      f.calls.push(`claimBatch(${c.request.items.length})`);
      cb(null, ClaimBatchResponse.fromPartial({ items: c.request.items.map((_, i) => ({ tasks: [{ id: `b${i}` }] })) }));
    },
    nack: (_c: unknown, cb: (e: ServiceError | null, r?: NackResponse) => void) => {
      f.calls.push("nack");
      const e = f.answer("nack");
      if (e) return cb(e);
      cb(null, NackResponse.fromPartial({}));
    },
  } as any);
  const port = await new Promise<number>((res, rej) => server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  f.addr = `127.0.0.1:${port}`;
  return f;
}

const a = await fake();
const b = await fake();
after(() => {
  a.server.forceShutdown();
  b.server.forceShutdown();
});

test("a NOT_LEADER hint is followed at once", async () => {
  a.leader = b.leader = a.addr; // both still believe in a
  a.answer = () => rpcError(status.UNAVAILABLE, "NOT_LEADER", b.addr);
  b.answer = () => null;
  a.calls.length = b.calls.length = 0;
  const c = new Client({ addrs: [a.addr, b.addr] });
  try {
    assert.equal(await c.enqueue("q", 1), "t1");
    assert.deepEqual(a.calls, ["enqueue"]);
    assert.deepEqual(b.calls, ["enqueue"]);
    assert.equal(c.conn.leaderAddr, b.addr);
  } finally {
    c.close();
  }
});

test("an enqueue whose outcome is unknown is resent with the same key", async () => {
  a.leader = b.leader = a.addr;
  let first = true;
  a.answer = () => (first ? ((first = false), rpcError(status.UNAVAILABLE, "LEADERSHIP_LOST")) : null);
  a.calls.length = a.keys.length = 0;
  const c = new Client({ addrs: [a.addr] });
  try {
    assert.equal(await c.enqueue("q", 1, { timeoutMs: 5_000 }), "t1");
    assert.equal(a.keys.length, 2);
    assert.equal(a.keys[0], a.keys[1]);
    assert.notEqual(a.keys[0], "");
  } finally {
    c.close();
  }
});

test("a nack whose outcome is unknown is not resent", async () => {
  a.leader = a.addr;
  a.answer = () => rpcError(status.UNAVAILABLE, "LEADERSHIP_LOST");
  a.calls.length = 0;
  const c = new Client({ addrs: [a.addr] });
  try {
    await assert.rejects(c.nack({ id: "t1", fence: 7n }), OutcomeUnknownError);
    assert.deepEqual(a.calls, ["nack"]);
  } finally {
    c.close();
  }
});

test("no leader within the deadline is UnavailableError, in bounded time", async () => {
  a.leader = "";
  a.answer = () => rpcError(status.UNAVAILABLE, "NOT_LEADER");
  const c = new Client({ addrs: [a.addr] });
  const t0 = Date.now();
  try {
    const e = await c.enqueue("q", 1, { timeoutMs: 800 }).then(() => undefined, (e) => e);
    assert.ok(e instanceof UnavailableError || (e as Error).name === "DeadlineError", `got ${e}`);
    assert.ok(Date.now() - t0 < 3_000);
  } finally {
    c.close();
  }
});

test("execTimeoutMs bounds the task's run, not the enqueue call; timeoutMs bounds the call, not the task", async () => {
  // A node of its own, for the reason the ClaimBatch test below gives.
  const f = await fake();
  f.leader = f.addr;
  const c = new Client({ addrs: [f.addr] });
  try {
    // The task's bound goes on the task, and the RPC keeps the call's own
    // budget (an attempt's 2 s), not the 200 ms the task may run.
    assert.equal(await c.enqueue("q", 1, { execTimeoutMs: 200 }), "t1");
    assert.deepEqual(f.enqueues[0]!.timeoutNs, [200_000_000n]);
    assert.ok(f.enqueues[0]!.budgetMs > 1_000, `the enqueue RPC had ${f.enqueues[0]!.budgetMs} ms`);
    // The call's deadline bounds the call and leaves the task unbounded.
    await c.enqueue("q", 2, { timeoutMs: 5_000 });
    assert.deepEqual(f.enqueues[1]!.timeoutNs, [0n]);
    // The same split in a batch: each item's bound, the call's deadline.
    await c.enqueueBatch([{ queue: "q", payload: 3, execTimeoutMs: 300 }, { queue: "q", payload: 4 }], { timeoutMs: 5_000 });
    assert.deepEqual(f.enqueues[2]!.timeoutNs, [300_000_000n, 0n]);
    // A task's bound is no call option, so it does not take an enqueue
    // off the shared path: three of one turn go as one RPC.
    f.enqueues.length = 0;
    assert.deepEqual(await Promise.all([1, 2, 3].map((i) => c.enqueue("q", i, { execTimeoutMs: 1_000 }))), ["t1", "t2", "t3"]);
    assert.deepEqual(f.enqueues.map((e) => e.timeoutNs), [[1_000_000_000n, 1_000_000_000n, 1_000_000_000n]]);
    // A JavaScript caller's item in the old spelling would lose its bound
    // without a word: it is refused, and nothing is sent.
    f.enqueues.length = 0;
    await assert.rejects(c.enqueueBatch([{ queue: "q", payload: 5, timeoutMs: 5_000 } as never]), (e: unknown) => e instanceof InvalidArgumentError && /execTimeoutMs/.test(e.message));
    assert.equal(f.enqueues.length, 0);
  } finally {
    c.close();
    f.server.forceShutdown();
  }
});

test("concurrent claims share a ClaimBatch; a lone long poll is one Claim", async () => {
  // A node of its own: the tests above give up on calls at their deadline,
  // and a request already on the wire may still reach a shared fake later.
  const f = await fake();
  f.leader = f.addr;
  const c = new Client({ addrs: [f.addr] });
  try {
    assert.equal((await c.claim("q", { waitMs: 1_000 })).length, 1);
    assert.deepEqual(f.calls, ["claim+wait"]);
    f.calls.length = 0;
    const all = await Promise.all(Array.from({ length: 6 }, () => c.claim("q", { max: 2 })));
    assert.ok(all.every((ts) => ts.length === 1));
    assert.deepEqual(f.calls, ["claimBatch(6)"], "claims of one turn share one RPC");
  } finally {
    c.close();
    f.server.forceShutdown();
  }
});
