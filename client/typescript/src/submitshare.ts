// Submits, shared or alone, and the claim that rides on them: a Worker's
// report claims the task its slot runs next in the same SubmitBatch, so a
// backlog drains with one Raft entry per step instead of two. The Go
// client's rules (client/submitshare.go, client/DESIGN.md).
import type { Conn, Unary } from "./conn.js";
import { SubmitBatchRequest, type ClaimRequest, type QueueClient, type SubmitBatchResponse, type SubmitRequest, type SubmitResponse } from "./gen/docketv1/api.js";
import { Code, type ItemResult } from "./gen/docketv1/command.js";
import { ClosedError, DeadlineError, DocketError, OutcomeUnknownError, itemError } from "./errors.js";
import { Sharer, UNIMPLEMENTED } from "./share.js";
import { taskInfo, type TaskInfo } from "./task.js";

export interface SubmitAnswer {
  alreadyDone: boolean;
  error?: DocketError;
}

/** One Submit, and the claim of one task that rides on it, if any. */
export interface SubmitItem {
  req: SubmitRequest;
  ride?: ClaimRequest;
}

/** A Submit's answer, and the task its ride claimed. */
export interface Submitted extends SubmitAnswer {
  next?: TaskInfo;
}

const submitRpc = ((c, r, m, o, cb) => c.submit(r, m, o, cb)) as Unary<QueueClient, SubmitRequest, SubmitResponse>;
export const submitBatchRpc = ((c, r, m, o, cb) => c.submitBatch(r, m, o, cb)) as Unary<QueueClient, SubmitBatchRequest, SubmitBatchResponse>;

/** What each Submit of a SubmitBatch would have answered on its own. */
export function answersOf(items: ItemResult[], n: number): Submitted[] {
  // The sharer hands each caller a slice by position: a short answer would
  // hand some none.
  if (items.length !== n) throw new DocketError(`docket: SubmitBatch answered ${items.length} items for ${n}`);
  return items.map((it) => ({ alreadyDone: it.code === Code.CODE_ALREADY_DONE, error: itemError(it.code, it.taskId, it.detail) }));
}

/** Whether two rides ask for tasks the same way, and so may be one claim. */
const sameClaim = (a: ClaimRequest, b: ClaimRequest) => a.queue === b.queue && a.tenant === b.tenant && a.workerId === b.workerId && a.leaseNs === b.leaseNs;

/**
 * A failure after which the submits may have applied, or the caller is
 * gone: sending them again without the claim would hide that.
 */
const mayHaveApplied = (e: unknown) => e instanceof OutcomeUnknownError || e instanceof DeadlineError || e instanceof ClosedError;

// A server older than SubmitBatch would cost each report a refused RPC;
// asked again after this, the cluster is found once a rolling upgrade ends
// (Go's retrySharedAfter).
const RIDE_OFF_MS = 60_000;

/**
 * Sends items as one SubmitBatch whose claim is the rides like the first
 * one (queue, tenant, worker, lease), of one task each; the tasks go to
 * those rides in order, and a ride unlike the first gets none. Undefined
 * when the server refused the call: the caller sends the submits again
 * without the claim, so that a claim's refusal never fails the report of a
 * finished task (a repeat of a Submit that applied answers ALREADY_DONE).
 */
async function riding(conn: Conn, items: SubmitItem[], off: { until: number }): Promise<Submitted[] | undefined> {
  if (Date.now() < off.until) return undefined;
  let claim: ClaimRequest | undefined;
  const riders: number[] = [];
  items.forEach((it, i) => {
    if (!it.ride) return;
    if (!claim) claim = { ...it.ride };
    else if (!sameClaim(claim, it.ride)) return;
    riders.push(i);
  });
  if (!claim) return undefined;
  claim.maxTasks = riders.length;
  let r: SubmitBatchResponse;
  try {
    // Repeatable as a Claim is: tasks claimed for an attempt whose answer
    // was lost are released, or wait out their lease.
    r = await conn.invoke("queue", submitBatchRpc, SubmitBatchRequest.fromPartial({ items: items.map((it) => it.req), claim }), { idempotent: true });
  } catch (e) {
    if (mayHaveApplied(e)) throw e;
    if (e instanceof DocketError && e.code === UNIMPLEMENTED) off.until = Date.now() + RIDE_OFF_MS;
    return undefined;
  }
  const out = answersOf(r.items, items.length);
  r.tasks.forEach((t, k) => {
    const i = riders[k];
    if (i !== undefined) out[i]!.next = taskInfo(t);
  });
  return out;
}

/** A Client's Submits: shared SubmitBatch RPCs past `limit` in flight, with their rides. */
export function submitter(conn: Conn, limit: number): Sharer<SubmitItem, Submitted> {
  const off = { until: 0 };
  return new Sharer<SubmitItem, Submitted>(
    limit,
    (it) => it.req.result.length + it.req.error.length + (it.ride ? 128 : 64),
    async ([it]) => {
      if (it!.ride) {
        const out = await riding(conn, [it!], off);
        if (out) return out;
      }
      // Alone: the plain Submit, whose refusals are whole-call errors.
      try {
        const r = await conn.invoke("queue", submitRpc, it!.req, { idempotent: true });
        return [{ alreadyDone: r.alreadyDone }];
      } catch (e) {
        if (e instanceof DocketError && !(e instanceof DeadlineError)) return [{ alreadyDone: false, error: e }];
        throw e;
      }
    },
    async (items) => {
      const out = await riding(conn, items, off);
      if (out) return out;
      const r = await conn.invoke("queue", submitBatchRpc, SubmitBatchRequest.fromPartial({ items: items.map((it) => it.req) }), { idempotent: true });
      return answersOf(r.items, items.length);
    },
  );
}
