// Pieces that need no cluster: the environment, codecs, error mapping.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import { configFromEnv, jsonCodec, mapError, InvalidArgumentError, StaleFenceError, OutcomeUnknownError, UnavailableError, NotFoundError, MemoryLimitError, TenantLimitError, TooLargeError, Client, DocketError } from "../src/index.js";
import { Status, ErrorInfo, BadRequest } from "../src/gen/google/rpc/status.js";
import { PerKeyPending, QueueOrder, QueueStats } from "../src/gen/docketv1/task.js";
import { queueInfo } from "../src/queue.js";
import { uuidv7 } from "../src/idemkey.js";

test("configFromEnv reads what the CLI reads", () => {
  const c = configFromEnv({ DOCKET_ADDR: " a:1, b:2 ,", DOCKET_TLS_CA: "/ca.pem", DOCKET_TOKEN: " s3cret " });
  assert.deepEqual(c.addrs, ["a:1", "b:2"]);
  assert.deepEqual(c.tls, { ca: "/ca.pem", cert: undefined, key: undefined });
  assert.equal(c.token, "s3cret");
  assert.throws(() => configFromEnv({ DOCKET_TLS_CERT: "/c.pem" }), /DOCKET_TLS_CERT is set without DOCKET_TLS_CA/);
});

test("a client without an address is refused at once", () => {
  assert.throws(() => new Client({ addrs: [] }), DocketError);
});

test("jsonCodec round-trips and stores undefined as no bytes", () => {
  assert.deepEqual(jsonCodec.decode(jsonCodec.encode({ a: [1, "x"] })), { a: [1, "x"] });
  assert.equal(jsonCodec.encode(undefined).length, 0);
});

function svcErr(code: number, details: Status["details"], msg = "m") {
  const md = new Metadata();
  md.set("grpc-status-details-bin", Buffer.from(Status.encode({ code, message: msg, details }).finish()));
  return Object.assign(new Error(msg), { code, details: msg, metadata: md });
}

test("mapError follows the error contract", () => {
  const info = (reason: string, metadata: Record<string, string> = {}) => ({
    typeUrl: "type.googleapis.com/google.rpc.ErrorInfo",
    value: Buffer.from(ErrorInfo.encode({ reason, domain: "docket.dev", metadata }).finish()),
  });
  const bad = {
    typeUrl: "type.googleapis.com/google.rpc.BadRequest",
    value: Buffer.from(BadRequest.encode({ fieldViolations: [{ field: "tasks[0].queue", description: "x" }] }).finish()),
  };
  const inv = mapError(svcErr(status.INVALID_ARGUMENT, [bad]));
  assert.ok(inv instanceof InvalidArgumentError);
  assert.equal((inv as InvalidArgumentError).field, "tasks[0].queue");
  const stale = mapError(svcErr(status.FAILED_PRECONDITION, [info("STALE_FENCE")], "fence is 42"));
  assert.ok(stale instanceof StaleFenceError);
  assert.doesNotMatch((stale as Error).message, /42/, "a stale writer learns only that it is stale");
  assert.ok(mapError(svcErr(status.UNAVAILABLE, [info("LEADERSHIP_LOST")])) instanceof OutcomeUnknownError);
  assert.ok(mapError(svcErr(status.UNAVAILABLE, [info("NOT_LEADER", { leader: "x:1" })])) instanceof UnavailableError);
  assert.ok(mapError(svcErr(status.NOT_FOUND, [])) instanceof NotFoundError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [info("MEMORY_LIMIT")])) instanceof MemoryLimitError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [info("TENANT_LIMIT")])) instanceof TenantLimitError);
  assert.ok(mapError(svcErr(status.RESOURCE_EXHAUSTED, [])) instanceof TooLargeError);
});

test("queueInfo turns the wire's QueueStats into numbers, enum strings and Dates", () => {
  const raw = QueueStats.fromPartial({
    queue: "q",
    tenant: "t",
    pending: 3n,
    delayed: 4n,
    running: 5n,
    dead: 6n,
    completed: 7n,
    waiting: 8n,
    oldestPendingAt: 1_700_000_000_123_456_789n,
    paused: true,
    totals: { enqueued: 10n, claimed: 9n, completed: 8n, failed: 7n, cancelled: 6n, deadLettered: 5n, requeued: 4n, leaseExpired: 3n, released: 2n },
    maxRunning: 11,
    rateMilli: 1_500n,
    burst: 12,
    tokensMilli: 2_000n,
    tenantMaxRunning: 13,
    tenantRunning: 14n,
    maxRunningPerKey: 15,
    order: QueueOrder.QUEUE_ORDER_FAIR,
    perKeyPending: PerKeyPending.PER_KEY_PENDING_KEEP_OLDEST,
    perKeyPendingDepth: 16,
  });
  assert.deepEqual(queueInfo(raw), {
    queue: "q",
    tenant: "t",
    pending: 3,
    delayed: 4,
    running: 5,
    dead: 6,
    completed: 7,
    waiting: 8,
    oldestPendingAt: new Date(1_700_000_000_123),
    paused: true,
    totals: { enqueued: 10, claimed: 9, completed: 8, failed: 7, cancelled: 6, deadLettered: 5, requeued: 4, leaseExpired: 3, released: 2 },
    maxRunning: 11,
    rateMilli: 1_500,
    burst: 12,
    tokensMilli: 2_000,
    tenantMaxRunning: 13,
    tenantRunning: 14,
    maxRunningPerKey: 15,
    order: "fair",
    perKeyPending: "keep-oldest",
    perKeyPendingDepth: 16,
    raw,
  });

  // Absent and zero: no totals before feature level 5, no head task to date.
  const empty = queueInfo(QueueStats.fromPartial({ queue: "e" }));
  assert.equal(empty.totals, undefined);
  assert.equal(empty.oldestPendingAt, undefined);
  assert.deepEqual([empty.order, empty.perKeyPending, empty.pending], ["fifo", "all", 0]);
  // An enum a newer server knows is no spelling of ours: undefined, which
  // setQueueLimits reads as "keep the queue's value", never as FIFO.
  const newer = queueInfo(QueueStats.fromPartial({ order: 7 as QueueOrder, perKeyPending: 9 as PerKeyPending }));
  assert.deepEqual([newer.order, newer.perKeyPending], [undefined, undefined]);
  // Past 2^53 a count rounds to the nearest double, as documented; raw is exact.
  const huge = queueInfo(QueueStats.fromPartial({ pending: 2n ** 53n + 1n }));
  assert.equal(huge.pending, 2 ** 53);
  assert.equal(huge.raw.pending, 2n ** 53n + 1n);
});

test("minted idempotency keys are UUIDv7s that sort by time and never repeat", () => {
  const seen = new Set<string>();
  let prevMax = "";
  for (let ms = 0; ms < 50; ms++) {
    const at = 1_790_000_000_000 + ms;
    let lo = "", hi = "";
    for (let i = 0; i < 200; i++) {
      const k = uuidv7(at);
      assert.match(k, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.ok(!seen.has(k), `key ${k} minted twice`);
      seen.add(k);
      if (lo === "" || k < lo) lo = k;
      if (k > hi) hi = k;
    }
    assert.ok(lo > prevMax, `a key of millisecond ${ms} (${lo}) sorts at or before an earlier one (${prevMax})`);
    prevMax = hi;
  }
  assert.equal(parseInt(uuidv7(0x0190_1234_5678).replace(/-/g, "").slice(0, 12), 16), 0x0190_1234_5678);
});

test("a full shared request goes beside the one in flight, and only a full one", async () => {
  const { Sharer } = await import("../src/share.js");
  const MiB = 1 << 20;
  const sent: number[][] = [];
  const release: (() => void)[] = [];
  const rpc = (items: number[]) =>
    new Promise<number[]>((resolve) => {
      sent.push(items);
      release.push(() => resolve(items));
    });
  // Each item is its own size in bytes; one RPC in flight, one more for a full request.
  const s = new Sharer<number, number>(1, (n) => n, rpc, rpc, () => 1, 1);
  const turn = () => new Promise((r) => setImmediate(r));
  const done: Promise<number[]>[] = [s.send([10])];
  await turn();
  assert.deepEqual(sent, [[10]], "a lone call goes at once");
  for (let i = 0; i < 3; i++) done.push(s.send([MiB]));
  await turn();
  await turn();
  assert.equal(sent.length, 1, "three MiB fill no 4 MiB request: they wait");
  done.push(s.send([MiB + 1])); // no longer fits: the three are full
  await turn();
  await turn();
  assert.deepEqual(sent[1], [MiB, MiB, MiB], "the full request goes beside the first");
  for (let i = 0; i < 4; i++) done.push(s.send([MiB]));
  await turn();
  await turn();
  assert.equal(sent.length, 2, "with the limit and the burst both taken, a full request waits");
  while (release.length > 0) {
    release.shift()!();
    await turn();
    await turn();
  }
  const answers = await Promise.all(done);
  assert.equal(answers.length, 9);
  assert.deepEqual(answers[4], [MiB + 1], "each caller gets its own answer");
});
