export { Client, type ClientOptions, type EnqueueItem, type EnqueueResult, type ClaimOptions, type ClusterStatus, type HeartbeatAnswer, type SubmitAnswer, type Report, type SubmitAndClaimOptions, type SubmitAndClaimResult, type KeyLimit, type KeyInfo, type KeyList } from "./client.js";
export type { QueueLimits, QueueOrder, PerKeyPending, QueueInfo, QueueTotals } from "./queue.js";
export { Worker, type Handler, type TaskContext, type WorkerOptions } from "./worker.js";
export { jsonCodec, rawCodec, type Codec } from "./codec.js";
export { Env, configFromEnv } from "./env.js";
export type { TLSOptions, CallOpts } from "./conn.js";
export type { TaskInfo, TaskOptions, RetryPolicy, State, Outcome } from "./task.js";
export type { QueueStats } from "./gen/docketv1/task.js";
export * from "./errors.js";
