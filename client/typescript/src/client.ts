// The producer's and operator's calls. Each method states whether it is
// safe to repeat after an unknown outcome; Conn.invoke does the rest.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ClusterClient, KeyStats, ListKeysResponse, QueueClient, StatusResponse } from "./gen/docketv1/api.js";
import {
  CancelRequest,
  ClaimBatchRequest,
  ClaimRequest,
  EnqueueRequest,
  GetTaskRequest,
  HeartbeatRequest,
  ListDeadRequest,
  ListKeysRequest,
  NackRequest,
  PauseQueueRequest,
  RequeueDeadRequest,
  ResumeQueueRequest,
  SetKeyLimitRequest,
  SetQueueLimitsRequest,
  SnoozeRequest,
  StatsRequest,
  StatusRequest,
  SubmitBatchRequest,
  SubmitRequest,
  WaitResultRequest,
} from "./gen/docketv1/api.js";
import { Code, HeartbeatItem, type ItemResult, type NewTask } from "./gen/docketv1/command.js";
import { Outcome as WireOutcome, type QueueStats, type Task } from "./gen/docketv1/task.js";
import { jsonCodec, type Codec } from "./codec.js";
import { Conn, type CallOpts, type ConnOptions, type Unary } from "./conn.js";
import { configFromEnv } from "./env.js";
import { DeadlineError, DocketError, InvalidArgumentError, itemError } from "./errors.js";
import { uuidv7 } from "./idemkey.js";
import { queueInfo, wireOrder, wirePerKeyPending, type QueueInfo, type QueueLimits } from "./queue.js";
import { Sharer } from "./share.js";
import { answersOf, submitBatchRpc, submitter, type SubmitAnswer, type SubmitItem, type Submitted } from "./submitshare.js";
import { msToNs, newTask, stateOf, taskInfo, type State, type TaskInfo, type TaskOptions } from "./task.js";

export interface ClientOptions extends ConnOptions {
  /** Tenant of every call that names none; empty: the server's default tenant. */
  tenant?: string;
  /** Encodes enqueue payloads; JSON by default. */
  codec?: Codec;
  /**
   * RPCs in flight before concurrent Enqueues (Submits, Claims) share
   * one; 0 turns sharing off. A number sets all three. Default: 1 for
   * Enqueue, 2 for Submit and Claim (BENCHMARKS.md, the TypeScript client).
   */
  shareInflight?: number | { enqueue?: number; submit?: number; claim?: number };
}

export interface EnqueueItem extends TaskOptions {
  queue: string;
  payload: unknown;
  /**
   * @deprecated Not an option of an item: the task's execution timeout is
   * execTimeoutMs, and the call's deadline is enqueueBatch's second
   * argument. enqueueBatch refuses an item that sets it
   * (InvalidArgumentError), so a bound in the old spelling is not lost
   * without a word.
   */
  timeoutMs?: never;
}

/** One task's answer in enqueueBatch. */
export interface EnqueueResult {
  id: string;
  /** An existing task answered for the idempotency key. */
  duplicate: boolean;
  /** Set when this task was refused (the others may have been stored). */
  error?: DocketError;
}

export interface ClaimOptions extends CallOpts {
  max?: number;
  leaseMs?: number;
  /** Long-poll: wait up to this long for a task (server caps at 30 s). */
  waitMs?: number;
  workerId?: string;
  tenant?: string;
}

export interface HeartbeatAnswer {
  taskId: string;
  error?: DocketError;
  cancelRequested: boolean;
}

export type { SubmitAnswer } from "./submitshare.js";

/** A claimed task's outcome, as submitAndClaim reports it. */
export interface Report {
  /** The task as claimed: a TaskInfo, or its id, fence and tenant. */
  task: { id: string; fence: bigint; tenant?: string };
  /** Default "completed". */
  outcome?: "completed" | "failed";
  /** A completed task's result, already encoded. */
  result?: Uint8Array;
  /** Why a failed task failed. */
  reason?: string;
}

/** The claim of submitAndClaim: a Claim's options without a wait. */
export interface SubmitAndClaimOptions extends CallOpts {
  /** Most tasks to claim; default one per report. */
  max?: number;
  leaseMs?: number;
  workerId?: string;
  /** The claim's tenant; the reports' are their tasks'. */
  tenant?: string;
}

export interface SubmitAndClaimResult {
  /** One per report, in order, as complete or fail would answer it. */
  answers: SubmitAnswer[];
  /** The tasks claimed, leased and fenced as claim's. */
  tasks: TaskInfo[];
}

export interface ClusterStatus {
  nodeId: string;
  state: string;
  leaderId: string;
  leaderAddr: string;
  term: bigint;
  commitIndex: bigint;
  appliedIndex: bigint;
  servers: { id: string; grpcAddr: string; leader: boolean; suffrage: string; health: string }[];
  raw: StatusResponse;
}

/**
 * What setKeyLimit changes of one key. An unset field keeps the key's value;
 * 0 clears it (the queue's maxRunningPerKey, weight 1).
 */
export interface KeyLimit {
  /** The key's own bound on its RUNNING tasks: a premium customer may get 10 where others get 1. */
  maxRunning?: number;
  /** The key's share of the fair order: weight 2 runs about twice the tasks of weight 1 while both have a backlog. At most 1000. */
  weight?: number;
}

/** One key of a keyed queue, as listKeys reports it. Keyless tasks are their own keys and are not listed. */
export interface KeyInfo {
  /** The key as text, decoded as UTF-8 the way TaskInfo.key is. */
  key: string;
  /**
   * The key's bytes. A key another client set need not be UTF-8, and then
   * key is not the same key: give keyBytes to setKeyLimit to change this one.
   */
  keyBytes: Uint8Array;
  pending: number;
  running: number;
  /** The key's limit: its override, or the queue's maxRunningPerKey; 0: none. */
  maxRunning: number;
  /** Its fair-order weight, 1 unless setKeyLimit gave another. */
  weight: number;
}

/** listKeys' answer: the queue's top keys both ways. */
export interface KeyList {
  /** Most pending first. */
  byBacklog: KeyInfo[];
  /** Most running first. */
  byRunning: KeyInfo[];
  /** Keys with a pending or running task, listed or not. */
  keys: number;
  /** False: the queue has no per-key rule, and both lists are empty. */
  keyed: boolean;
  raw: ListKeysResponse;
}

// Counts are uint64 on the wire; a key's backlog stays far below 2^53.
const keyInfo = (k: KeyStats): KeyInfo => ({
  key: Buffer.from(k.key).toString("utf8"),
  keyBytes: k.key,
  pending: Number(k.pending),
  running: k.running,
  maxRunning: k.maxRunning,
  weight: Math.max(1, k.weight),
});

type Q<Req, Res> = Unary<QueueClient, Req, Res>;
type C<Req, Res> = Unary<ClusterClient, Req, Res>;
const q = {
  enqueue: ((c, r, m, o, cb) => c.enqueue(r, m, o, cb)) as Q<EnqueueRequest, any>,
  claim: ((c, r, m, o, cb) => c.claim(r, m, o, cb)) as Q<ClaimRequest, any>,
  claimBatch: ((c, r, m, o, cb) => c.claimBatch(r, m, o, cb)) as Q<ClaimBatchRequest, any>,
  heartbeat: ((c, r, m, o, cb) => c.heartbeat(r, m, o, cb)) as Q<HeartbeatRequest, any>,
  nack: ((c, r, m, o, cb) => c.nack(r, m, o, cb)) as Q<NackRequest, any>,
  snooze: ((c, r, m, o, cb) => c.snooze(r, m, o, cb)) as Q<SnoozeRequest, any>,
  cancel: ((c, r, m, o, cb) => c.cancel(r, m, o, cb)) as Q<CancelRequest, any>,
  getTask: ((c, r, m, o, cb) => c.getTask(r, m, o, cb)) as Q<GetTaskRequest, any>,
  waitResult: ((c, r, m, o, cb) => c.waitResult(r, m, o, cb)) as Q<WaitResultRequest, any>,
  stats: ((c, r, m, o, cb) => c.stats(r, m, o, cb)) as Q<StatsRequest, any>,
  listDead: ((c, r, m, o, cb) => c.listDead(r, m, o, cb)) as Q<ListDeadRequest, any>,
  requeueDead: ((c, r, m, o, cb) => c.requeueDead(r, m, o, cb)) as Q<RequeueDeadRequest, any>,
  pause: ((c, r, m, o, cb) => c.pauseQueue(r, m, o, cb)) as Q<PauseQueueRequest, any>,
  resume: ((c, r, m, o, cb) => c.resumeQueue(r, m, o, cb)) as Q<ResumeQueueRequest, any>,
  setQueueLimits: ((c, r, m, o, cb) => c.setQueueLimits(r, m, o, cb)) as Q<SetQueueLimitsRequest, any>,
  setKeyLimit: ((c, r, m, o, cb) => c.setKeyLimit(r, m, o, cb)) as Q<SetKeyLimitRequest, any>,
  listKeys: ((c, r, m, o, cb) => c.listKeys(r, m, o, cb)) as Q<ListKeysRequest, ListKeysResponse>,
};
const clusterStatusRpc = ((c, r, m, o, cb) => c.status(r, m, o, cb)) as C<StatusRequest, StatusResponse>;

// A WaitResult round is at most the server's long-poll cap (docketv1.MaxWait).
const MAX_WAIT_MS = 30_000;

export class Client {
  readonly conn: Conn;
  readonly tenant: string;
  readonly codec: Codec;
  /** The worker id of claims that name none: the server wants one, and it shows in a task's history. */
  readonly workerId = `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
  private readonly enqueuer: Sharer<NewTask, ItemResult>;
  private readonly submitter: Sharer<SubmitItem, Submitted>;
  private readonly claimer: Sharer<ClaimRequest, Task[]>;
  /** Claims under way, long polls included: a lone long poll has nobody to share with. */
  private claiming = 0;

  constructor(o: ClientOptions) {
    this.conn = new Conn(o);
    this.tenant = o.tenant ?? "";
    this.codec = o.codec ?? jsonCodec;
    const n = o.shareInflight;
    const share =
      typeof n === "number" ? { enqueue: n, submit: n, claim: n } : { enqueue: n?.enqueue ?? 1, submit: n?.submit ?? 2, claim: n?.claim ?? 2 };
    this.claimer = new Sharer(
      share.claim,
      () => 64,
      async ([r]) => [((await this.conn.invoke("queue", q.claim, r!, { idempotent: true })).tasks as Task[])],
      async (items) => ((await this.conn.invoke("queue", q.claimBatch, ClaimBatchRequest.fromPartial({ items }), { idempotent: true })).items as { tasks: Task[] }[]).map((it) => it.tasks),
      (r) => Math.max(1, r.maxTasks),
    );
    const enq = (tasks: NewTask[]) =>
      this.conn
        .invoke("queue", q.enqueue, EnqueueRequest.fromPartial({ tasks }), { idempotent: true })
        .then((r: { items: ItemResult[] }) => r.items);
    // A full Enqueue (4 MiB, 1,000 tasks) goes beside the one in flight, as in Go.
    this.enqueuer = new Sharer(share.enqueue, (t) => t.payload.length + 64, enq, enq, () => 1, 1);
    this.submitter = submitter(this.conn, share.submit);
  }

  /**
   * A client configured from the environment the docket CLI reads
   * (DOCKET_ADDR, DOCKET_TLS_CA, DOCKET_TLS_CERT, DOCKET_TLS_KEY,
   * DOCKET_TOKEN); options given here win.
   */
  static fromEnv(o: Partial<ClientOptions> = {}, env: NodeJS.ProcessEnv = process.env): Client {
    const e = configFromEnv(env);
    return new Client({ ...e, ...o, addrs: [...(o.addrs ?? []), ...e.addrs] });
  }

  close(): void {
    this.conn.close();
  }

  /** Enqueues one task and returns its id (an existing task's id when the idempotency key repeats). */
  async enqueue(queue: string, payload: unknown, o: TaskOptions & CallOpts & { codec?: Codec } = {}): Promise<string> {
    // The call's options stay off the task: timeoutMs here is the call's
    // deadline only (the task's bound is execTimeoutMs).
    const { signal, timeoutMs, codec, ...task } = o;
    const [r] = await this.enqueueBatch([{ ...task, queue, payload }], { signal, timeoutMs, codec });
    if (r!.error) throw r!.error;
    return r!.id;
  }

  /**
   * Enqueues tasks in one request (one Raft entry). Tasks that name
   * parents go as a request of their own, so that parentIndexes count
   * within it and the graph is stored whole or not at all.
   */
  async enqueueBatch(items: EnqueueItem[], o: CallOpts & { codec?: Codec } = {}): Promise<EnqueueResult[]> {
    const codec = o.codec ?? this.codec;
    // An item's timeoutMs was its execution timeout before execTimeoutMs
    // (README.md, "Upgrading"); an item cannot carry a call's deadline, so
    // one there is the old spelling, and dropping it would leave the task
    // unbounded. enqueue cannot tell, since its timeoutMs is a call option.
    const stale = items.findIndex((it) => (it as { timeoutMs?: unknown }).timeoutMs !== undefined);
    if (stale >= 0) {
      throw new InvalidArgumentError(`docket: item ${stale} sets timeoutMs: a task's execution timeout is execTimeoutMs, and the call's deadline is enqueueBatch's { timeoutMs }`, { field: "timeout_ns" });
    }
    // Keys are minted before the first attempt, so every retry of this
    // call, ours or the caller's with the same items, is applied once.
    const tasks = items.map((it) => newTask(it.queue, codec.encode(it.payload), it, it.idempotencyKey ?? uuidv7(), this.tenant));
    const graph = tasks.some((t) => t.after.length > 0 || t.afterIndex.length > 0);
    let res: ItemResult[];
    if (graph || o.signal || o.timeoutMs !== undefined) {
      const r = await this.conn.invoke("queue", q.enqueue, EnqueueRequest.fromPartial({ tasks }), { idempotent: true, ...o });
      res = r.items;
    } else {
      res = await this.enqueuer.send(tasks);
    }
    return res.map((it) => ({ id: it.taskId, duplicate: it.code === Code.CODE_DUPLICATE, error: itemError(it.code, it.taskId, it.detail) }));
  }

  /** Reads a task; linearizable unless stale, which reads any node's replica. */
  async getTask(id: string, o: CallOpts & { stale?: boolean; tenant?: string } = {}): Promise<TaskInfo> {
    const r = await this.conn.invoke("queue", q.getTask, GetTaskRequest.fromPartial({ taskId: id, allowStale: o.stale ?? false, tenant: o.tenant ?? this.tenant }), { idempotent: true, ...o });
    return taskInfo(r.task);
  }

  /**
   * Waits until the task finishes (completed, failed, dead or cancelled)
   * and returns it; DeadlineError when timeoutMs (default 30 s) passes first.
   */
  async waitResult(id: string, o: CallOpts & { tenant?: string } = {}): Promise<TaskInfo> {
    const end = Date.now() + (o.timeoutMs ?? MAX_WAIT_MS);
    for (let i = 0; i < 100_000; i++) {
      const left = end - Date.now();
      if (left <= 0) break;
      const wait = Math.min(left, MAX_WAIT_MS);
      const r = await this.conn.invoke(
        "queue",
        q.waitResult,
        WaitResultRequest.fromPartial({ taskId: id, waitNs: msToNs(wait), tenant: o.tenant ?? this.tenant }),
        { idempotent: true, signal: o.signal, waitMs: wait, timeoutMs: Math.max(left, wait + this.conn.attemptTimeoutMs) },
      );
      if (r.done) return taskInfo(r.task);
    }
    throw new DeadlineError(`docket: task ${id} did not finish in time`);
  }

  /**
   * Cancels a task. A waiting one ends at once; a running one is marked,
   * its worker's handler is aborted at its next heartbeat (cancelRequested).
   */
  async cancel(id: string, o: CallOpts & { tenant?: string } = {}): Promise<{ cancelRequested: boolean; state: State }> {
    const r = await this.conn.invoke("queue", q.cancel, CancelRequest.fromPartial({ taskId: id, tenant: o.tenant ?? this.tenant }), { idempotent: true, ...o });
    return { cancelRequested: r.cancelRequested, state: stateOf(r.state) };
  }

  /**
   * Claims up to max tasks of a queue under a lease: what a Worker does for
   * you. Concurrent claims of one Client share ClaimBatch RPCs, which never
   * wait, as in the Go client (client/claimshare.go): a long poll among
   * other claims first tries with them, and only if that found nothing
   * waits out the rest on its own Claim RPC; a lone long poll is one RPC.
   */
  async claim(queue: string, o: ClaimOptions = {}): Promise<TaskInfo[]> {
    const waitMs = Math.min(o.waitMs ?? 0, MAX_WAIT_MS);
    const req = this.claimRequest(queue, o);
    this.claiming++;
    try {
      const start = Date.now();
      // A caller's own signal or deadline cannot ride a shared RPC; a long
      // poll's try without a wait is short enough to ride one anyway.
      const callerBound = o.signal !== undefined || o.timeoutMs !== undefined;
      const tryShared = waitMs > 0 ? this.claiming > 1 : !callerBound;
      if (tryShared) {
        const [ts] = await this.claimer.send([req]);
        if (ts!.length > 0 || waitMs === 0) return ts!.map(taskInfo);
      }
      const left = waitMs - (Date.now() - start);
      if (waitMs > 0 && left <= 0) return [];
      // A lost claim answer leaves a lease that expires: safe to repeat.
      const wait = Math.max(0, left);
      const r = await this.conn.invoke("queue", q.claim, { ...req, waitNs: msToNs(wait) }, { idempotent: true, waitMs: wait, ...o });
      return (r.tasks as Task[]).map(taskInfo);
    } finally {
      this.claiming--;
    }
  }

  private claimRequest(queue: string, o: Omit<ClaimOptions, "waitMs">): ClaimRequest {
    return ClaimRequest.fromPartial({
      queue,
      tenant: o.tenant ?? this.tenant,
      workerId: o.workerId ?? this.workerId,
      leaseNs: msToNs(o.leaseMs ?? 30_000),
      maxTasks: o.max ?? 1,
      waitNs: 0n,
    });
  }

  /**
   * Reports tasks and, in the same Raft entry, claims up to max more of
   * queue: one replicated round per step of a worker's loop instead of two
   * (a Submit, then a Claim). The claim runs after the reports and never
   * waits. No tasks means the leader had none to give at once, or the
   * server predates the claim (it then answers the reports alone): claim,
   * which may wait, from there. An error means no report is known to have
   * been taken, and a refused claim fails the call even when the reports
   * applied: report them again (complete or fail), and a repeat of one that
   * applied answers alreadyDone. Repeated after an unknown outcome, as
   * claim is; a Worker's reports do this for it.
   */
  async submitAndClaim(queue: string, reports: Report[], o: SubmitAndClaimOptions = {}): Promise<SubmitAndClaimResult> {
    if (reports.length === 0) throw new InvalidArgumentError("docket: submitAndClaim without reports: use claim", { field: "items" });
    const items = reports.map((r) =>
      this.submitRequest(r.task, r.outcome === "failed" ? WireOutcome.OUTCOME_FAILED : WireOutcome.OUTCOME_COMPLETED, r.result ?? new Uint8Array(0), r.reason ?? ""),
    );
    const claim = this.claimRequest(queue, { ...o, max: o.max ?? reports.length });
    const r = await this.conn.invoke("queue", submitBatchRpc, SubmitBatchRequest.fromPartial({ items, claim }), { idempotent: true, signal: o.signal, timeoutMs: o.timeoutMs });
    const answers = answersOf(r.items, items.length).map(({ alreadyDone, error }) => ({ alreadyDone, error }));
    return { answers, tasks: r.tasks.map(taskInfo) };
  }

  /** Extends leases; each item answers on its own (StaleFenceError when the lease is gone). */
  async heartbeat(items: { id: string; fence: bigint; leaseMs: number; tenant?: string; progress?: Uint8Array }[], o: CallOpts = {}): Promise<HeartbeatAnswer[]> {
    const req = HeartbeatRequest.fromPartial({
      items: items.map((it) =>
        HeartbeatItem.fromPartial({
          taskId: it.id,
          fence: it.fence,
          leaseNs: msToNs(it.leaseMs),
          tenant: it.tenant ?? this.tenant,
          hasProgress: it.progress !== undefined,
          progress: it.progress ? Buffer.from(it.progress) : Buffer.alloc(0),
        }),
      ),
    });
    const r = await this.conn.invoke("queue", q.heartbeat, req, { idempotent: true, ...o });
    return (r.items as ItemResult[]).map((it) => ({ taskId: it.taskId, error: itemError(it.code, it.taskId, it.detail), cancelRequested: it.cancelRequested }));
  }

  /** Completes a claimed task under its fence; a repeat after success answers alreadyDone. */
  async complete(t: { id: string; fence: bigint; tenant?: string }, result: Uint8Array = new Uint8Array(0)): Promise<SubmitAnswer> {
    return this.submit(t, WireOutcome.OUTCOME_COMPLETED, result, "");
  }

  /** Fails a claimed task for good (no retry). */
  async fail(t: { id: string; fence: bigint; tenant?: string }, reason: string): Promise<SubmitAnswer> {
    return this.submit(t, WireOutcome.OUTCOME_FAILED, new Uint8Array(0), reason);
  }

  private async submit(t: { id: string; fence: bigint; tenant?: string }, outcome: WireOutcome, result: Uint8Array, error: string): Promise<SubmitAnswer> {
    const [a] = await this.submitter.send([{ req: this.submitRequest(t, outcome, result, error) }]);
    return { alreadyDone: a!.alreadyDone, error: a!.error };
  }

  private submitRequest(t: { id: string; fence: bigint; tenant?: string }, outcome: WireOutcome, result: Uint8Array, error: string): SubmitRequest {
    return SubmitRequest.fromPartial({ taskId: t.id, fence: t.fence, outcome, result: Buffer.from(result), error, tenant: t.tenant ?? this.tenant });
  }

  /**
   * @internal A Worker's report (complete or fail), sharing Submits as
   * complete does, with the claim of one task riding on it: the task the
   * worker's freed slot runs next, in `next`. If the server refuses the
   * claim, the report goes again without it (submitshare.ts).
   */
  async submitRiding(
    t: { id: string; fence: bigint; tenant?: string },
    outcome: "completed" | "failed",
    o: { result?: Uint8Array; reason?: string; ride?: { queue: string } & Omit<ClaimOptions, "waitMs" | "max" | keyof CallOpts> },
  ): Promise<SubmitAnswer & { next?: TaskInfo }> {
    const wire = outcome === "failed" ? WireOutcome.OUTCOME_FAILED : WireOutcome.OUTCOME_COMPLETED;
    const ride = o.ride && this.claimRequest(o.ride.queue, { ...o.ride, max: 1 });
    const [a] = await this.submitter.send([{ req: this.submitRequest(t, wire, o.result ?? new Uint8Array(0), o.reason ?? ""), ride }]);
    return a!;
  }

  /**
   * Gives a claimed task back to be retried (after delayMs), or dead-lettered
   * at its max attempts. Not repeated after an unknown outcome: a second
   * Nack would meet a new claim's fence, so OutcomeUnknownError is returned.
   */
  async nack(t: { id: string; fence: bigint; tenant?: string }, o: CallOpts & { delayMs?: number; reason?: string } = {}): Promise<State> {
    const req = NackRequest.fromPartial({ taskId: t.id, fence: t.fence, delayNs: msToNs(o.delayMs ?? 0), reason: o.reason ?? "", tenant: t.tenant ?? this.tenant });
    const r = await this.conn.invoke("queue", q.nack, req, { idempotent: false, ...o });
    return stateOf(r.state);
  }

  /**
   * Hands a claimed task (its fence) back, to be claimable again after
   * delayMs, without spending an attempt: resolves to its state after
   * (delayed, or pending with no delay).
   */
  async snooze(t: { id: string; fence: bigint; tenant?: string }, o: CallOpts & { delayMs?: number } = {}): Promise<State> {
    const req = SnoozeRequest.fromPartial({ taskId: t.id, fence: t.fence, delayNs: msToNs(o.delayMs ?? 0), tenant: t.tenant ?? this.tenant });
    const r = await this.conn.invoke("queue", q.snooze, req, { idempotent: false, ...o });
    return stateOf(r.state);
  }

  /** Stops claims of a queue until resumeQueue; true when it changed. */
  async pauseQueue(queue: string, o: CallOpts & { tenant?: string } = {}): Promise<boolean> {
    const r = await this.conn.invoke("queue", q.pause, PauseQueueRequest.fromPartial({ queue, tenant: o.tenant ?? this.tenant }), { idempotent: true, ...o });
    return r.changed;
  }

  async resumeQueue(queue: string, o: CallOpts & { tenant?: string } = {}): Promise<boolean> {
    const r = await this.conn.invoke("queue", q.resume, ResumeQueueRequest.fromPartial({ queue, tenant: o.tenant ?? this.tenant }), { idempotent: true, ...o });
    return r.changed;
  }

  /**
   * Counts, limits and rules of every queue (or one), following the
   * answer's pages. The limits read back in setQueueLimits' own spellings.
   */
  async stats(queue = "", o: CallOpts & { tenant?: string } = {}): Promise<QueueInfo[]> {
    const out: QueueInfo[] = [];
    let cursor = "";
    for (let page = 0; page < 10_000; page++) {
      const r = await this.conn.invoke("queue", q.stats, StatsRequest.fromPartial({ queue, tenant: o.tenant ?? this.tenant, cursor }), { idempotent: true, ...o });
      out.push(...(r.queues as QueueStats[]).map(queueInfo));
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return out;
  }

  /** One page of dead letters; pass nextCursor back for the next. */
  async listDead(queue = "", o: CallOpts & { tenant?: string; limit?: number; cursor?: string } = {}): Promise<{ tasks: TaskInfo[]; nextCursor: string }> {
    const r = await this.conn.invoke(
      "queue",
      q.listDead,
      ListDeadRequest.fromPartial({ queue, tenant: o.tenant ?? this.tenant, cursor: o.cursor ?? "", limit: o.limit ?? 0 }),
      { idempotent: true, ...o },
    );
    return { tasks: (r.tasks as any[]).map(taskInfo), nextCursor: r.nextCursor };
  }

  /**
   * Puts dead letters back to pending: one task by id, or up to limit of a
   * queue. Not repeated after an unknown outcome (a repeat could requeue
   * tasks that died again since).
   */
  async requeueDead(what: { taskId: string } | { queue: string; limit?: number }, o: CallOpts & { tenant?: string } = {}): Promise<{ id: string; error?: DocketError }[]> {
    const req = RequeueDeadRequest.fromPartial({
      taskId: "taskId" in what ? what.taskId : "",
      queue: "queue" in what ? what.queue : "",
      limit: "limit" in what ? (what.limit ?? 0) : 0,
      tenant: o.tenant ?? this.tenant,
    });
    const r = await this.conn.invoke("queue", q.requeueDead, req, { idempotent: false, ...o });
    return (r.items as ItemResult[]).map((it) => ({ id: it.taskId, error: itemError(it.code, it.taskId, it.detail) }));
  }

  /**
   * Sets or clears the limits and fair-queue rules of a queue (an empty
   * queue: the tenant's own concurrency limit, maxRunning only). A claim the
   * limits leave empty answers empty; a long poll waits until a running task
   * ends or a token is due. False when every given value was already so.
   * Limits set a state, so a repeat after an unknown outcome is harmless.
   * Needs admin over the tenant, and feature level 10 (16 for the per-key
   * fields), else FeatureDisabledError.
   */
  async setQueueLimits(queue: string, o: QueueLimits & CallOpts & { tenant?: string }): Promise<boolean> {
    const req = SetQueueLimitsRequest.fromPartial({
      queue,
      tenant: o.tenant ?? this.tenant,
      maxRunning: o.maxRunning,
      rateMilli: o.rateMilli === undefined ? undefined : BigInt(o.rateMilli),
      burst: o.burst,
      maxRunningPerKey: o.maxRunningPerKey,
      order: o.order === undefined ? undefined : wireOrder(o.order),
      perKeyPending: o.perKeyPending === undefined ? undefined : wirePerKeyPending(o.perKeyPending),
      perKeyPendingDepth: o.perKeyPendingDepth,
    });
    const r = await this.conn.invoke("queue", q.setQueueLimits, req, { idempotent: true, ...o });
    return r.changed;
  }

  /**
   * Overrides one key's per-key limit and fair-order weight in a queue. The
   * key is a task's taskKey, or a listed key's keyBytes (exact when they are
   * not UTF-8). False when every given value was already so; a state, so
   * repeated after an unknown outcome. Needs admin over the tenant and
   * feature level 16.
   */
  async setKeyLimit(queue: string, key: string | Uint8Array, o: KeyLimit & CallOpts & { tenant?: string }): Promise<boolean> {
    const req = SetKeyLimitRequest.fromPartial({
      queue,
      tenant: o.tenant ?? this.tenant,
      key: typeof key === "string" ? Buffer.from(key, "utf8") : Buffer.from(key.buffer, key.byteOffset, key.byteLength),
      maxRunning: o.maxRunning,
      weight: o.weight,
    });
    const r = await this.conn.invoke("queue", q.setKeyLimit, req, { idempotent: true, ...o });
    return r.changed;
  }

  /**
   * The top keys of a keyed queue by backlog and by running, up to limit of
   * each (0: 20, at most 1000): where a noisy key shows. Linearizable, so a
   * claim just answered is counted. Reader or admin over the tenant.
   */
  async listKeys(queue: string, o: CallOpts & { tenant?: string; limit?: number } = {}): Promise<KeyList> {
    const r = await this.conn.invoke("queue", q.listKeys, ListKeysRequest.fromPartial({ queue, tenant: o.tenant ?? this.tenant, limit: o.limit ?? 0 }), { idempotent: true, ...o });
    return { byBacklog: r.byBacklog.map(keyInfo), byRunning: r.byRunning.map(keyInfo), keys: Number(r.keys), keyed: r.keyed, raw: r };
  }

  /** The answering node's view of the cluster: its leader, term, indexes and servers. */
  async clusterStatus(o: CallOpts = {}): Promise<ClusterStatus> {
    const r = await this.conn.invoke("cluster", clusterStatusRpc, StatusRequest.fromPartial({}), { idempotent: true, ...o });
    return {
      nodeId: r.nodeId,
      state: r.state,
      leaderId: r.leaderId,
      leaderAddr: r.leaderGrpcAddr,
      term: r.term,
      commitIndex: r.commitIndex,
      appliedIndex: r.appliedIndex,
      servers: r.servers.map((s) => ({ id: s.id, grpcAddr: s.grpcAddr, leader: s.leader, suffrage: s.suffrage, health: s.health })),
      raw: r,
    };
  }
}

