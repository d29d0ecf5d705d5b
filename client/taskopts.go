package client

import (
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// TaskOption sets a field of a task for EnqueueOne and EnqueueJSON. The
// options are named Task*, so that they cannot be taken for the Client's
// options (type Option, named With*): TaskTimeout bounds a task's run,
// WithAttemptTimeout one attempt of a call.
type TaskOption func(*docketv1.NewTask)

// TaskTenant sets the task's tenant; empty means docketv1.DefaultTenant.
func TaskTenant(tenant string) TaskOption { return func(t *docketv1.NewTask) { t.Tenant = tenant } }

// TaskPriority sets the priority, 0..9; 9 is claimed first.
func TaskPriority(p uint32) TaskOption { return func(t *docketv1.NewTask) { t.Priority = p } }

// TaskDelay makes the task claimable only after d.
func TaskDelay(d time.Duration) TaskOption {
	return func(t *docketv1.NewTask) { t.DelayNs = int64(d) }
}

// TaskRunAt makes the task claimable only at at; it wins over TaskDelay.
func TaskRunAt(at time.Time) TaskOption {
	return func(t *docketv1.NewTask) { t.RunAt = at.UnixNano() }
}

// TaskMaxAttempts sets how many claims may end without a Submit before
// the task is dead-lettered; 0 is the server's default.
func TaskMaxAttempts(n uint32) TaskOption {
	return func(t *docketv1.NewTask) { t.MaxAttempts = n }
}

// TaskIdempotencyKey sets the key that deduplicates the enqueue. Without
// one the client mints a random key.
func TaskIdempotencyKey(key string) TaskOption {
	return func(t *docketv1.NewTask) { t.IdempotencyKey = key }
}

// TaskRetention sets how long the finished task is kept; 0 is the
// server's default.
func TaskRetention(d time.Duration) TaskOption {
	return func(t *docketv1.NewTask) { t.RetentionNs = int64(d) }
}

// TaskTimeout bounds each claim's run of the task (NewTask.timeout_ns),
// separately from the lease: past it the claim ends even while its worker
// heartbeats, FAILED unless TaskRetryOnTimeout. Needs feature level 9.
func TaskTimeout(d time.Duration) TaskOption {
	return func(t *docketv1.NewTask) { t.TimeoutNs = int64(d) }
}

// TaskRetryOnTimeout retries a claim that ran past its TaskTimeout,
// counting an attempt (dead-lettered at max attempts), instead of
// failing the task.
func TaskRetryOnTimeout() TaskOption {
	return func(t *docketv1.NewTask) { t.RetryOnTimeout = true }
}

// TaskAfter makes the task wait (TASK_STATE_WAITING) until every task in
// ids completed (deps.go).
func TaskAfter(ids ...string) TaskOption {
	return func(t *docketv1.NewTask) { t.After = append(t.After, ids...) }
}

// TaskRunOnParentFailure makes the task run even when a parent ends
// failed, dead or cancelled; by default such a parent cancels it.
func TaskRunOnParentFailure() TaskOption {
	return func(t *docketv1.NewTask) { t.OnParentFailure = docketv1.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN }
}

// The task options' old names, kept for one release.

// WithTenant is TaskTenant.
//
// Deprecated: use TaskTenant; With* names configure the Client.
func WithTenant(tenant string) TaskOption { return TaskTenant(tenant) }

// WithPriority is TaskPriority.
//
// Deprecated: use TaskPriority; With* names configure the Client.
func WithPriority(p uint32) TaskOption { return TaskPriority(p) }

// WithDelay is TaskDelay.
//
// Deprecated: use TaskDelay; With* names configure the Client.
func WithDelay(d time.Duration) TaskOption { return TaskDelay(d) }

// WithRunAt is TaskRunAt.
//
// Deprecated: use TaskRunAt; With* names configure the Client.
func WithRunAt(at time.Time) TaskOption { return TaskRunAt(at) }

// WithMaxAttempts is TaskMaxAttempts.
//
// Deprecated: use TaskMaxAttempts; With* names configure the Client.
func WithMaxAttempts(n uint32) TaskOption { return TaskMaxAttempts(n) }

// WithIdempotencyKey is TaskIdempotencyKey.
//
// Deprecated: use TaskIdempotencyKey; With* names configure the Client.
func WithIdempotencyKey(key string) TaskOption { return TaskIdempotencyKey(key) }

// WithRetention is TaskRetention.
//
// Deprecated: use TaskRetention; With* names configure the Client.
func WithRetention(d time.Duration) TaskOption { return TaskRetention(d) }

// WithTimeout is TaskTimeout: a task's execution timeout, not a call's
// (that is WithAttemptTimeout, or ctx).
//
// Deprecated: use TaskTimeout; With* names configure the Client.
func WithTimeout(d time.Duration) TaskOption { return TaskTimeout(d) }

// WithRetryOnTimeout is TaskRetryOnTimeout.
//
// Deprecated: use TaskRetryOnTimeout; With* names configure the Client.
func WithRetryOnTimeout() TaskOption { return TaskRetryOnTimeout() }

// WithAfter is TaskAfter.
//
// Deprecated: use TaskAfter; With* names configure the Client.
func WithAfter(ids ...string) TaskOption { return TaskAfter(ids...) }

// WithParentFailureRun is TaskRunOnParentFailure.
//
// Deprecated: use TaskRunOnParentFailure; With* names configure the Client.
func WithParentFailureRun() TaskOption { return TaskRunOnParentFailure() }
