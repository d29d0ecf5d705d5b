// The one place where gRPC statuses become Docket's error classes. A caller
// branches with instanceof and never sees a bare gRPC status; the code,
// reason and the server's message stay on the error for logs.
import { Metadata, status as Status, type ServiceError } from "@grpc/grpc-js";
import { Code } from "./gen/docketv1/command.js";
import { BadRequest, ErrorInfo, Status as RpcStatus } from "./gen/google/rpc/status.js";

/** ErrorInfo domain of every error a Docket server sends (proto/docketv1/reasons.go). */
export const ERROR_DOMAIN = "docket.dev";

/** Reasons of the error contract (proto/docketv1/reasons.go). */
export const Reason = {
  StaleFence: "STALE_FENCE",
  WrongState: "WRONG_STATE",
  TenantLimit: "TENANT_LIMIT",
  MemoryLimit: "MEMORY_LIMIT",
  TimedOut: "TIMED_OUT",
  Cancelled: "CANCELLED",
  LeadershipLost: "LEADERSHIP_LOST",
  NotLeader: "NOT_LEADER",
  ShuttingDown: "SHUTTING_DOWN",
  Overloaded: "OVERLOADED",
  NotServing: "NOT_SERVING",
  FeatureDisabled: "FEATURE_DISABLED",
} as const;

/** Base class of every error the client throws for a server answer or a failed call. */
export class DocketError extends Error {
  /** The gRPC status code the server answered, when there was an answer. */
  readonly code?: number;
  /** The ErrorInfo reason, when the server sent one. */
  readonly reason?: string;
  constructor(message: string, opts: { code?: number; reason?: string; cause?: unknown } = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = new.target.name;
    this.code = opts.code;
    this.reason = opts.reason;
  }
}

/** The task does not exist: it never did, or it was purged after its retention. */
export class NotFoundError extends DocketError {}
/**
 * The task is not running under the fence given: the lease was lost. The
 * caller must stop acting on the task. It carries no server text: a stale
 * writer learns only that it is stale.
 */
export class StaleFenceError extends DocketError {}
/** The task's state does not allow the operation. */
export class WrongStateError extends DocketError {}
/** A request field is invalid; `field` names it when the server did. Never retried. */
export class InvalidArgumentError extends DocketError {
  readonly field?: string;
  constructor(message: string, opts: { code?: number; reason?: string; field?: string; cause?: unknown } = {}) {
    super(message, opts);
    this.field = opts.field;
  }
}
/** A payload, result or batch is above the server's limit; `field` names it. */
export class TooLargeError extends InvalidArgumentError {}
/** The tenant is at its limit of stored tasks or bytes; nothing was stored. */
export class TenantLimitError extends DocketError {}
/** The node is at its memory limit and refuses new tasks; nothing was stored. Retry later. */
export class MemoryLimitError extends DocketError {}
/** No token, or one the server does not accept. */
export class UnauthenticatedError extends DocketError {}
/** The token's roles or tenants do not allow the call. */
export class PermissionDeniedError extends DocketError {}
/** The cluster has not enabled the feature the call needs (a server runs an older build). */
export class FeatureDisabledError extends DocketError {}
/** The task's claim ran past its execution deadline; the worker must stop. */
export class TimedOutError extends DocketError {}
/**
 * The task was cancelled: a Submit under a claim that Cancel reached is
 * refused with it, and a handler's AbortSignal carries it when a cancel
 * request reaches a running task.
 */
export class CancelledError extends DocketError {}
/**
 * No leader could be reached before the call's deadline. The request was
 * most likely not applied.
 */
export class UnavailableError extends DocketError {}
/**
 * The request may or may not have taken effect (the leader lost its
 * leadership while applying it, or an attempt got no answer in time). The
 * client retries it itself only for calls that are safe to repeat.
 */
export class OutcomeUnknownError extends DocketError {}
/** The call's own deadline or AbortSignal ended it. */
export class DeadlineError extends DocketError {}
/** The lease of a running task is gone: a handler's AbortSignal carries it. */
export class LeaseLostError extends DocketError {}
/** The client was closed. */
export class ClosedError extends DocketError {}

/**
 * A handler throws this (see `permanent`) to fail its task for good
 * instead of having it retried.
 */
export class PermanentError extends Error {
  constructor(message: string, opts?: { cause?: unknown }) {
    super(message, opts);
    this.name = "PermanentError";
  }
}

/** Wraps an error so that the worker fails the task for good (Submit FAILED) instead of retrying it. */
export function permanent(err: unknown): PermanentError {
  const msg = err instanceof Error ? err.message : String(err);
  return new PermanentError(msg, { cause: err });
}

interface Details {
  reason?: string;
  leader?: string;
  field?: string;
}

const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";
const BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest";

/** Reads the rich error model (grpc-status-details-bin) of a status's trailers. */
export function statusDetails(md: Metadata | undefined): Details {
  const out: Details = {};
  const raw = md?.get("grpc-status-details-bin")[0];
  if (!raw || typeof raw === "string") return out;
  let st: RpcStatus;
  try {
    st = RpcStatus.decode(raw);
  } catch {
    return out; // a status we cannot read tells us nothing; the code still does
  }
  for (const d of st.details) {
    if (d.typeUrl === ERROR_INFO_TYPE) {
      const info = ErrorInfo.decode(d.value);
      if (info.domain === ERROR_DOMAIN || info.domain === "") {
        out.reason ??= info.reason;
        out.leader ??= info.metadata["leader"] || undefined;
      }
    } else if (d.typeUrl === BAD_REQUEST_TYPE && out.field === undefined) {
      const br = BadRequest.decode(d.value);
      out.field = br.fieldViolations.find((v) => v.field !== "")?.field;
    }
  }
  return out;
}

export function isServiceError(e: unknown): e is ServiceError {
  return e instanceof Error && typeof (e as ServiceError).code === "number" && "metadata" in e;
}

/** Maps a gRPC error to its class. Errors without a gRPC status pass through. */
export function mapError(e: unknown): unknown {
  if (e instanceof DocketError || !isServiceError(e)) return e;
  const d = statusDetails(e.metadata);
  const msg = e.details || Status[e.code] || "error";
  const o = { code: e.code, reason: d.reason, cause: e };
  const text = (what: string) => (msg && msg !== what ? `docket: ${what}: ${msg}` : `docket: ${what}`);
  switch (e.code) {
    case Status.NOT_FOUND:
      return new NotFoundError(text("not found"), o);
    case Status.UNAUTHENTICATED:
      return new UnauthenticatedError(text("unauthenticated"), o);
    case Status.PERMISSION_DENIED:
      return new PermissionDeniedError(text("permission denied"), o);
    case Status.INVALID_ARGUMENT:
      return new InvalidArgumentError(text(d.field ? `invalid argument: field ${d.field}` : "invalid argument"), { ...o, field: d.field });
    case Status.RESOURCE_EXHAUSTED:
      if (d.reason === Reason.TenantLimit) return new TenantLimitError(text("tenant limit reached"), o);
      if (d.reason === Reason.MemoryLimit) return new MemoryLimitError(text("node at its memory limit"), o);
      return new TooLargeError(text(d.field ? `too large: field ${d.field}` : "too large"), { ...o, field: d.field });
    case Status.FAILED_PRECONDITION:
      switch (d.reason) {
        case Reason.StaleFence:
          return new StaleFenceError("docket: stale fence", { code: e.code, reason: d.reason });
        case Reason.WrongState:
          return new WrongStateError(text("task in wrong state"), o);
        case Reason.FeatureDisabled:
          return new FeatureDisabledError(text("feature not enabled on this cluster"), o);
        case Reason.TimedOut:
          return new TimedOutError(text("task timed out"), o);
        case Reason.Cancelled:
          return new CancelledError(text("task cancelled"), o);
      }
      return new DocketError(text("failed precondition"), o);
    case Status.UNAVAILABLE:
      if (d.reason === Reason.LeadershipLost) return new OutcomeUnknownError(text("outcome unknown"), o);
      return new UnavailableError(text("no leader reachable"), o);
    case Status.DEADLINE_EXCEEDED:
    case Status.CANCELLED:
      return new DeadlineError(text("deadline exceeded"), o);
  }
  return new DocketError(text(Status[e.code] ?? `code ${e.code}`), o);
}

/** Item codes of batch answers (docketv1.Code), mapped as whole-call errors are. */
export function itemError(code: Code, taskId: string, detail: string): DocketError | undefined {
  const t = (what: string) => (detail ? `docket: ${what}: task ${taskId}: ${detail}` : `docket: ${what}: task ${taskId}`);
  switch (code) {
    case Code.CODE_OK:
    case Code.CODE_ALREADY_DONE:
    case Code.CODE_DUPLICATE:
      return undefined;
    case Code.CODE_NOT_FOUND:
      return new NotFoundError(t("not found"));
    case Code.CODE_STALE_FENCE:
      return new StaleFenceError(`docket: stale fence: task ${taskId}`);
    case Code.CODE_INVALID_ARGUMENT:
      return new InvalidArgumentError(t("invalid argument"), { field: detail || undefined });
    case Code.CODE_WRONG_STATE:
      return new WrongStateError(t("task in wrong state"));
    case Code.CODE_RESOURCE_EXHAUSTED:
      return new TenantLimitError(t("tenant limit reached"));
    case Code.CODE_TIMED_OUT:
      return new TimedOutError(t("task timed out"));
    case Code.CODE_CANCELLED:
      return new CancelledError(t("task cancelled"));
  }
  return new DocketError(t(`unknown item code ${code}`));
}
