// A worker claims with long polls, heartbeats every lease it holds in one
// RPC per lease/3, and reports each handler's outcome under the claim's
// fence; a report claims the task its slot runs next (a ride). Its rules
// are the Go Worker's (client/DESIGN.md, Workers).
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Client } from "./client.js";
import { jsonCodec, type Codec } from "./codec.js";
import { CancelledError, ClosedError, DocketError, FeatureDisabledError, LeaseLostError, NotFoundError, PermanentError, StaleFenceError, TimedOutError, UnavailableError, DeadlineError } from "./errors.js";
import { UNIMPLEMENTED } from "./share.js";
import type { TaskInfo } from "./task.js";

/** What a handler knows of the task it works on. */
export interface TaskContext {
  id: string;
  queue: string;
  tenant: string;
  /** 1 for the first claim of the task. */
  attempt: number;
  /** The claim's fence: pass it to a downstream that rejects stale writers. */
  fence: bigint;
  /**
   * Aborted when the handler must stop: the lease is lost (LeaseLostError),
   * the task was cancelled (CancelledError), it ran past its execTimeoutMs
   * (TimedOutError), or the worker is closing and the grace period ran out.
   */
  signal: AbortSignal;
  /** Progress bytes sent with the next heartbeat and kept across retries. */
  setProgress(p: Uint8Array): void;
  task: TaskInfo;
}

export type Handler<In, Out> = (payload: In, t: TaskContext) => Promise<Out> | Out;

export interface WorkerOptions {
  /** Handlers run at once. Default 1. */
  concurrency?: number;
  /** Lease of each claim in ms; heartbeats go every lease/3. Default 30000. */
  leaseMs?: number;
  /** Most tasks one claim takes. Default: concurrency. */
  claimBatch?: number;
  /** A claim's long poll in ms (the server caps it at 30 s); 0 polls every 100 ms. Default 30000. */
  waitMs?: number;
  /** Decodes payloads and encodes results. Default JSON. */
  codec?: Codec;
  workerId?: string;
  tenant?: string;
  /** How long close() lets running handlers finish before it aborts them. Default 30000. */
  shutdownTimeoutMs?: number;
  /** Errors the worker recovered from (a claim that failed, a report refused). Default: ignored. */
  onError?: (err: unknown) => void;
}

interface Running {
  t: TaskInfo;
  ac: AbortController;
  progress?: Uint8Array;
  /** The server said the claim is over: report nothing. */
  dropped: boolean;
  expiry?: NodeJS.Timeout;
}

/** A task a report claimed, and when that claim was sent. */
interface Next {
  t: TaskInfo;
  sent: number;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });

export class Worker<In = unknown, Out = unknown> {
  readonly workerId: string;
  private readonly o: Required<Omit<WorkerOptions, "tenant" | "workerId">> & { tenant?: string };
  private readonly running = new Map<string, Running>();
  /** Each busy slot's run: its task, then the tasks its reports claimed. */
  private readonly slots = new Set<Promise<void>>();
  private readonly stopClaims = new AbortController();
  private readonly loop: Promise<void>;
  private readonly beats: NodeJS.Timeout;
  private slotFreed?: () => void;
  private closing?: Promise<void>;
  private beating = false;
  /** Tasks whose outcome this worker reported (completed, failed or nacked). */
  processed = 0;

  constructor(
    readonly client: Client,
    readonly queue: string,
    private readonly handler: Handler<In, Out>,
    o: WorkerOptions = {},
  ) {
    const concurrency = Math.max(1, o.concurrency ?? 1);
    this.o = {
      concurrency,
      leaseMs: o.leaseMs ?? 30_000,
      claimBatch: Math.max(1, Math.min(o.claimBatch ?? concurrency, concurrency)),
      waitMs: o.waitMs ?? 30_000,
      codec: o.codec ?? jsonCodec,
      tenant: o.tenant,
      shutdownTimeoutMs: o.shutdownTimeoutMs ?? 30_000,
      onError: o.onError ?? (() => {}),
    };
    this.workerId = o.workerId ?? `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
    this.beats = setInterval(() => void this.beat(), Math.max(10, Math.floor(this.o.leaseMs / 3)));
    this.loop = this.run();
  }

  /** Tasks whose handlers run now. */
  get active(): number {
    return this.running.size;
  }

  private async run(): Promise<void> {
    const stop = this.stopClaims.signal;
    let backoff = 50;
    while (!stop.aborted) {
      const free = this.o.concurrency - this.running.size;
      // Every claim is a Raft entry: a worker that claimed for each slot
      // as it freed would make the cluster apply a claim per task or two.
      // It waits for half a claim batch of free slots (or an idle worker).
      if (free <= 0 || (free < Math.ceil(this.o.claimBatch / 2) && this.running.size > 0)) {
        await new Promise<void>((resolve) => {
          // One listener per wait, removed once the wait is over: the
          // signal lives as long as the worker.
          const done = () => {
            stop.removeEventListener("abort", done);
            resolve();
          };
          this.slotFreed = done;
          stop.addEventListener("abort", done, { once: true });
        });
        // Handlers whose reports rode one shared Submit free their slots
        // in the same turn: let them all, so that one claim takes their
        // tasks rather than one claim per freed slot.
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
      const sent = Date.now();
      let tasks: TaskInfo[];
      try {
        tasks = await this.client.claim(this.queue, {
          max: Math.min(free, this.o.claimBatch),
          leaseMs: this.o.leaseMs,
          waitMs: this.o.waitMs,
          workerId: this.workerId,
          tenant: this.o.tenant,
          signal: stop,
        });
        backoff = 50;
      } catch (e) {
        if (stop.aborted) break;
        if (e instanceof ClosedError) break;
        // No leader within the call's deadline, or a refusal: keep trying,
        // so a worker outlives an election with no code of the user's.
        if (!(e instanceof UnavailableError || e instanceof DeadlineError)) this.o.onError(e);
        await sleep(Math.random() * backoff, stop);
        backoff = Math.min(backoff * 2, 1000);
        continue;
      }
      for (const t of tasks) this.start(t, sent);
      // Without a long poll an empty queue would be asked again at once,
      // in a loop as fast as the cluster answers.
      if (tasks.length === 0 && this.o.waitMs <= 0) await sleep(100, stop);
    }
  }

  private start(t: TaskInfo, sent: number): void {
    const slot: Promise<void> = this.runSlot(this.track(t, sent)).finally(() => {
      this.slots.delete(slot);
      const f = this.slotFreed;
      this.slotFreed = undefined;
      f?.();
    });
    this.slots.add(slot);
  }

  // The task a report claimed takes the place of the one reported in the
  // same turn, so the claim loop never sees the slot free; a report that
  // brings none frees it, and the claim loop's long poll takes over.
  private async runSlot(first: Running): Promise<void> {
    for (let r: Running | undefined = first; r; ) {
      let next: Next | undefined;
      try {
        next = await this.work(r);
      } finally {
        clearTimeout(r.expiry);
        this.running.delete(r.t.id);
      }
      r = next && this.track(next.t, next.sent);
    }
  }

  private track(t: TaskInfo, sent: number): Running {
    const r: Running = { t, ac: new AbortController(), dropped: false };
    this.running.set(t.id, r);
    this.armExpiry(r, sent);
    return r;
  }

  // The lease is counted from when the claim or heartbeat was sent, so the
  // local deadline is never later than the server's.
  private armExpiry(r: Running, sent: number): void {
    clearTimeout(r.expiry);
    const left = sent + this.o.leaseMs - Date.now();
    r.expiry = setTimeout(() => r.ac.abort(new LeaseLostError(`docket: lease of task ${r.t.id} ran out by the local clock`)), Math.max(0, left));
  }

  private async work(r: Running): Promise<Next | undefined> {
    const t = r.t;
    let payload: In;
    try {
      payload = this.o.codec.decode(t.payload) as In;
    } catch (e) {
      // Retried rather than failed: during a rolling upgrade of workers,
      // a payload one build cannot read another may.
      return this.report(r, undefined, new Error(`docket: bad payload: ${(e as Error).message}`));
    }
    const ctx: TaskContext = {
      id: t.id,
      queue: t.queue,
      tenant: t.tenant,
      attempt: t.raw.claims || t.attempts + 1,
      fence: t.fence,
      signal: r.ac.signal,
      setProgress: (p) => {
        r.progress = p;
      },
      task: t,
    };
    let out: Out | undefined;
    let err: unknown;
    try {
      out = await this.handler(payload, ctx);
    } catch (e) {
      err = e ?? new Error("handler threw a nullish value");
    }
    return this.report(r, out, err);
  }

  /** Reports the handler's outcome; a Submit brings the slot's next task when it claimed one. */
  private async report(r: Running, out: unknown, err: unknown): Promise<Next | undefined> {
    if (r.dropped) return; // the server ended the claim: a report would be refused
    const t = { id: r.t.id, fence: r.t.fence, tenant: r.t.tenant };
    try {
      if (err === undefined) {
        let bytes: Uint8Array;
        try {
          bytes = this.o.codec.encode(out);
        } catch (e) {
          // Running it again would repeat its effects: fail it for good.
          return await this.submit(t, "failed", { reason: `docket: result does not encode: ${(e as Error).message}` });
        }
        return await this.submit(t, "completed", { result: bytes });
      } else if (err instanceof PermanentError) {
        return await this.submit(t, "failed", { reason: err.message });
      } else {
        // A Nack does not ride: it is no SubmitBatch item.
        const reason = err instanceof Error ? err.message : String(err);
        await this.client.nack(t, { reason });
        this.processed++;
      }
    } catch (e) {
      // An unknown Nack outcome or an unreachable cluster: the lease
      // expires and the server retries the task.
      this.o.onError(e);
    }
  }

  private async submit(t: { id: string; fence: bigint; tenant: string }, outcome: "completed" | "failed", o: { result?: Uint8Array; reason?: string }): Promise<Next | undefined> {
    // The claim loop runs until close: while it does, the slot this report
    // frees is the worker's to fill, with a claim like the loop's.
    const ride = this.stopClaims.signal.aborted ? undefined : { queue: this.queue, tenant: this.o.tenant, workerId: this.workerId, leaseMs: this.o.leaseMs };
    const sent = Date.now();
    const a = await this.client.submitRiding(t, outcome, { ...o, ride });
    // A task cancelled while it ran ended CANCELLED: its result is dropped, nothing is wrong.
    if (a.error && !(outcome === "completed" && a.error instanceof CancelledError)) this.o.onError(a.error);
    else this.processed++;
    if (!a.next) return undefined;
    if (!this.stopClaims.signal.aborted) return { t: a.next, sent };
    // Claimed as the worker began to stop: give it back now rather than
    // leave it to its lease. A snooze spends no attempt (no handler saw
    // the task); a nack would count a failure and dead-letter a task at
    // its last attempt. A cluster older than Snooze gets the nack.
    try {
      try {
        await this.client.snooze(a.next);
      } catch (e) {
        if (!(e instanceof FeatureDisabledError || (e instanceof DocketError && e.code === UNIMPLEMENTED))) throw e;
        await this.client.nack(a.next, { reason: "docket: worker closing" });
      }
    } catch (e) {
      this.o.onError(e);
    }
    return undefined;
  }

  private async beat(): Promise<void> {
    if (this.beating) return;
    // A cancelled handler still holds its lease while it winds down; a
    // lost or closed one does not.
    const live = [...this.running.values()].filter((r) => !r.dropped && (!r.ac.signal.aborted || r.ac.signal.reason instanceof CancelledError));
    if (live.length === 0) return;
    this.beating = true;
    const sent = Date.now();
    try {
      const answers = await this.client.heartbeat(
        live.map((r) => ({ id: r.t.id, fence: r.t.fence, leaseMs: this.o.leaseMs, tenant: r.t.tenant, progress: r.progress })),
        { timeoutMs: Math.max(100, Math.floor(this.o.leaseMs / 3)) },
      );
      answers.forEach((a, i) => {
        const r = live[i];
        if (!r) return;
        if (a.error instanceof StaleFenceError || a.error instanceof NotFoundError) {
          r.dropped = true;
          r.ac.abort(new LeaseLostError(`docket: lease of task ${r.t.id} lost`));
        } else if (a.error instanceof TimedOutError) {
          // The leader ends the claim by the task's policy; a report
          // would be judged the same way.
          r.dropped = true;
          r.ac.abort(a.error);
        } else if (a.error) {
          this.o.onError(a.error);
        } else {
          this.armExpiry(r, sent);
          // Heartbeats go on after a cancel request, so a handler that
          // winds down slowly is not reaped meanwhile.
          if (a.cancelRequested && !r.ac.signal.aborted) r.ac.abort(new CancelledError(`docket: task ${r.t.id} cancelled`));
        }
      });
    } catch (e) {
      // The local lease clock stops the handlers if this goes on too long.
      if (!(e instanceof UnavailableError || e instanceof DeadlineError)) this.o.onError(e);
    } finally {
      this.beating = false;
    }
  }

  /**
   * Stops claiming and drains: running handlers get shutdownTimeoutMs to
   * finish (their outcomes are reported as usual), then their signals abort
   * and what they throw is nacked. Resolves when every report is sent and
   * no timer of the worker is left.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopClaims.abort(new ClosedError("docket: worker closing"));
      await this.loop;
      const all = () => Promise.all([...this.slots]);
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), this.o.shutdownTimeoutMs)));
      const first = await Promise.race([all().then(() => "done" as const), grace]);
      clearTimeout(timer);
      if (first === "late") {
        for (const r of this.running.values()) r.ac.abort(new DocketError("docket: worker closed before the handler finished"));
        await all();
      }
      clearInterval(this.beats);
    })();
    return this.closing;
  }
}
