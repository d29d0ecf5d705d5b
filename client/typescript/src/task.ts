// The common path speaks JavaScript types (Date, ms, string states), not
// the wire's (Unix ns bigints, enum numbers); `raw` keeps the wire record.
import { NewTask } from "./gen/docketv1/command.js";
import { Outcome as WireOutcome, ParentFailurePolicy, TaskState, type RetryPolicy as WireRetry, type Task } from "./gen/docketv1/task.js";

export type State = "pending" | "delayed" | "running" | "completed" | "failed" | "dead" | "cancelled" | "waiting" | "unknown";
export type Outcome = "completed" | "failed" | "cancelled" | "unknown";

export function stateOf(s: TaskState): State {
  switch (s) {
    case TaskState.TASK_STATE_PENDING:
      return "pending";
    case TaskState.TASK_STATE_DELAYED:
      return "delayed";
    case TaskState.TASK_STATE_RUNNING:
      return "running";
    case TaskState.TASK_STATE_COMPLETED:
      return "completed";
    case TaskState.TASK_STATE_FAILED:
      return "failed";
    case TaskState.TASK_STATE_DEAD:
      return "dead";
    case TaskState.TASK_STATE_CANCELLED:
      return "cancelled";
    case TaskState.TASK_STATE_WAITING:
      return "waiting";
  }
  // A state a newer server knows and this build does not.
  return "unknown";
}

export function outcomeOf(o: WireOutcome): Outcome {
  switch (o) {
    case WireOutcome.OUTCOME_COMPLETED:
      return "completed";
    case WireOutcome.OUTCOME_FAILED:
      return "failed";
    case WireOutcome.OUTCOME_CANCELLED:
      return "cancelled";
  }
  return "unknown";
}

const NS_PER_MS = 1_000_000n;
export const msToNs = (ms: number): bigint => BigInt(Math.round(ms * 1e6));
export const nsToMs = (ns: bigint): number => Number(ns / NS_PER_MS);
export const dateOf = (ns: bigint): Date | undefined => (ns === 0n ? undefined : new Date(Number(ns / NS_PER_MS)));

/** A task's record in JavaScript types. */
export interface TaskInfo {
  id: string;
  queue: string;
  tenant: string;
  state: State;
  outcome?: Outcome;
  payload: Uint8Array;
  result: Uint8Array;
  priority: number;
  attempts: number;
  maxAttempts: number;
  lastError: string;
  idempotencyKey: string;
  /** The task's key, its unit of fairness in a fair queue; empty when none. */
  key: string;
  parents: string[];
  createdAt?: Date;
  visibleAt?: Date;
  finishedAt?: Date;
  cancelRequested: boolean;
  /** The claim's fence: set only on a task this worker claimed. */
  fence: bigint;
  /** The wire record, for the fields left out here. */
  raw: Task;
}

export function taskInfo(t: Task): TaskInfo {
  return {
    id: t.id,
    queue: t.queue,
    tenant: t.tenant,
    state: stateOf(t.state),
    outcome: t.outcome === WireOutcome.OUTCOME_UNSPECIFIED ? undefined : outcomeOf(t.outcome),
    payload: t.payload,
    result: t.result,
    priority: t.priority,
    attempts: t.attempts,
    maxAttempts: t.maxAttempts,
    lastError: t.lastError,
    idempotencyKey: t.idempotencyKey,
    key: Buffer.from(t.key).toString("utf8"),
    parents: t.parents,
    createdAt: dateOf(t.createdAt),
    visibleAt: dateOf(t.visibleAt),
    finishedAt: dateOf(t.finishedAt),
    cancelRequested: t.cancelRequested,
    fence: t.fence,
    raw: t,
  };
}

/** Backoff between a task's attempts (server side): min(cap, base * multiplier^(n-1)) less jitter. */
export interface RetryPolicy {
  baseMs: number;
  capMs?: number;
  multiplier?: number;
  jitterPercent?: number;
}

/** Every option of a task. Unset options take the server's defaults. */
export interface TaskOptions {
  /** 0..9; 9 is claimed first. */
  priority?: number;
  /** Invisible to claims for this long. */
  delayMs?: number;
  /** Invisible to claims until then; wins over delayMs. */
  runAt?: Date;
  /** Dead-lettered when its attempts reach this (server default 5). */
  maxAttempts?: number;
  /** How long a finished task and its idempotency key are kept (server default 24 h). */
  retentionMs?: number;
  /**
   * A retried enqueue with the same key answers the first task. The client
   * makes one when none is given, so its own retries never duplicate a task.
   */
  idempotencyKey?: string;
  /**
   * The task's key: its unit of fairness, usually the end customer it works
   * for (at most 256 bytes). A queue with a per-key limit or the fair order
   * counts and orders its tasks by it. Needs feature level 16.
   */
  taskKey?: string;
  /** Tasks (ids) that must complete before this one runs. */
  parents?: string[];
  /** In enqueueBatch: earlier items of the same batch (by index) that must complete first. */
  parentIndexes?: number[];
  /** What a waiting task does when a parent fails: "cancel" (default) or "run". */
  onParentFailure?: "cancel" | "run";
  /**
   * The execution timeout: bounds each claim's run of the task
   * (NewTask.timeout_ns, feature level 9). Past claim time + this the
   * claim ends, heartbeats or not: FAILED, or retried with retryOnTimeout,
   * and the handler's signal aborts with TimedOutError. 0 or unset: none.
   *
   * Not `timeoutMs`: every call takes that as its own deadline (CallOpts),
   * and enqueue takes both in one object. The name is the CLI's
   * (`docket enqueue --exec-timeout`, chosen because every verb's
   * --timeout is the call's) and the server's ("execution timeout"); the
   * Go client spells it TaskTimeout. It was TaskOptions.timeoutMs before
   * (README.md, "Upgrading").
   */
  execTimeoutMs?: number;
  /** A claim that ran past execTimeoutMs counts an attempt and is retried instead of failing the task. */
  retryOnTimeout?: boolean;
  retry?: RetryPolicy;
  /** The task's tenant; default the client's (or the server's default tenant). */
  tenant?: string;
}

export function newTask(queue: string, payload: Uint8Array, o: TaskOptions, key: string, tenant: string): NewTask {
  let retry: WireRetry | undefined;
  if (o.retry) {
    retry = {
      baseNs: msToNs(o.retry.baseMs),
      capNs: msToNs(o.retry.capMs ?? 0),
      multiplier: o.retry.multiplier ?? 0,
      jitterPercent: o.retry.jitterPercent ?? 0,
    };
  }
  return NewTask.fromPartial({
    queue,
    tenant: o.tenant ?? tenant,
    payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    priority: o.priority ?? 0,
    runAt: o.runAt ? BigInt(o.runAt.getTime()) * NS_PER_MS : 0n,
    delayNs: o.delayMs ? msToNs(o.delayMs) : 0n,
    maxAttempts: o.maxAttempts ?? 0,
    idempotencyKey: key,
    retentionNs: o.retentionMs ? msToNs(o.retentionMs) : 0n,
    retry,
    timeoutNs: o.execTimeoutMs ? msToNs(o.execTimeoutMs) : 0n,
    retryOnTimeout: o.retryOnTimeout ?? false,
    key: Buffer.from(o.taskKey ?? "", "utf8"),
    after: o.parents ?? [],
    afterIndex: o.parentIndexes ?? [],
    onParentFailure:
      o.onParentFailure === "run"
        ? ParentFailurePolicy.PARENT_FAILURE_POLICY_RUN
        : o.onParentFailure === "cancel"
          ? ParentFailurePolicy.PARENT_FAILURE_POLICY_CANCEL
          : ParentFailurePolicy.PARENT_FAILURE_POLICY_UNSPECIFIED,
  });
}
