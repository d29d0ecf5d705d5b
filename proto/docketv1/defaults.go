// The hand-written half of package docketv1. The generated files (*.pb.go)
// hold the messages; this file and reasons.go hold the values that the
// server and the Go client must agree on but that a .proto cannot carry:
// request defaults, and the words of the error contract (ErrorInfo domain,
// reasons, metadata keys). `make proto` regenerates only *.pb.go, so these
// files survive it.
//
// # Decisions and trade-offs
//
//   - One place: the server (cluster, transport), the FSM, the Go client
//     and the CLI import these constants instead of spelling the values,
//     so a default or a reason cannot drift between the two ends of the
//     wire. Constants, not proto enum values: the reasons travel as
//     strings in errdetails.ErrorInfo, which other languages' clients
//     read as strings, and an enum would add a conversion on both sides
//     for nothing.
//   - A request default is what an empty (zero) field means. The server
//     applies it; the client uses the same value when it must know what
//     the server will do (the worker's lease clock, a CLI flag's default).
//   - DefaultMaxAttempts and DefaultRetention are applied by the FSM at
//     apply time, so they are rules of the state machine: changing one
//     changes what apply writes, and needs the rolling-upgrade latch
//     (DESIGN.md), like any change to apply.
//   - A value over a size limit is ResourceExhausted with a BadRequest
//     naming the field and no ErrorInfo reason; TENANT_LIMIT is the only
//     ResourceExhausted with one. Inside the server the FSM's FieldError
//     says so by type (CommandResult.error_too_large), never by its text.
//   - List cursors (next_cursor) are opaque tokens, valid only for the
//     listing that handed them out; any other is InvalidArgument naming
//     "cursor". storage owns their format.
package docketv1

import "time"

// Request defaults: what a request field left zero means.
const (
	// DefaultTenant is the tenant of a request that names none.
	DefaultTenant = "default"

	// MaxBatch is the most items one request carries: tasks of an
	// Enqueue, tasks a Claim takes, items of a Heartbeat, Submit or Nack
	// batch, and one page of a listing.
	MaxBatch = 1000

	// DefaultMaxTasks is a Claim's max_tasks when it gives 0.
	DefaultMaxTasks = 1

	// DefaultLease is a Claim's lease when lease_ns is 0, and the Go
	// worker's lease when its configuration gives none. A server
	// embedding Docket may set another default for Claims
	// (service.ServiceConfig.DefaultLease); the Go worker always sends
	// its lease.
	DefaultLease = 30 * time.Second

	// DefaultListLimit is a ListDead page's size when limit is 0.
	DefaultListLimit = 100

	// MaxWait is the longest long-poll (Claim, WaitResult) a server
	// honours by default; a longer wait_ns is shortened to it. The client
	// polls in rounds of at most MaxWait.
	MaxWait = 30 * time.Second

	// DefaultMaxAttempts is a new task's max_attempts when it gives 0:
	// the attempt at which a nacked or expired task is dead-lettered.
	// Applied by the FSM.
	DefaultMaxAttempts = 5

	// DefaultRetention is how long a finished task (and its idempotency
	// key) is kept when retention_ns is 0. Applied by the FSM.
	DefaultRetention = 24 * time.Hour

	// DefaultDeadRetention is how long a dead letter is kept when its
	// queue sets no dead_retention_ns, once the cluster latched feature
	// level 12 (retries); dead letters of earlier levels are kept until
	// replayed or purged. Applied by the FSM.
	DefaultDeadRetention = 14 * 24 * time.Hour
)

// Roles a token may grant.
const (
	RoleProducer = "producer"
	RoleWorker   = "worker"
	RoleReader   = "reader"
	RoleAdmin    = "admin"
)

// AllTenants, as a token's tenant, grants its roles over every tenant.
const AllTenants = "*"
