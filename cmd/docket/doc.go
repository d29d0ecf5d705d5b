// Command docket is Docket's one binary: the server (`docket agent`), a
// local development cluster (`docket dev`) and the operator verbs.
//
// # Decisions and trade-offs
//
//   - Queue control verbs (queueverbs.go): `docket queue pause|resume|purge
//     QUEUE` act on --tenant's queue (the default tenant unless given),
//     `docket dlq purge QUEUE` on its dead letters, and `docket queues`
//     lists Stats of every queue the token sees, across tenants unless
//     --tenant narrows it: listing is Stats, not an RPC of its own. `docket
//     wait ID` waits up to --timeout, the common flag, rather than a flag of
//     its own; past it the verb fails like any call that ran out of time.
//   - Cancel verbs (cancelverbs.go): `docket cancel ID` prints "cancel
//     requested" for a running task (feature level 9) and CANCELLED for a
//     waiting one; --json is the CancelResponse. The execution timeout is
//     `docket enqueue --exec-timeout D`, not --timeout: --timeout is
//     every verb's call deadline, and giving it a second meaning on one
//     verb would change what existing scripts do. `docket task` shows the timeout, the current claim's deadline
//     and a cancel request.
//   - `docket dev` is secure by default (TLS on every channel, --auth, a
//     throwaway CA and an admin token in the data dir), so the everyday
//     path is the one a shared network needs; --insecure is the explicit
//     opt-out. It writes <data-dir>/env (0600) for a shell to source, and
//     `make run` keeps its data dir (data/dev), so the README can name that
//     file and a restart keeps the CA and token a shell already holds.
//     Clients need only the CA: the nodes verify a client certificate if
//     one is given, and the token authenticates.
//   - The debug server (--debug-addr) of an agent that runs TLS and --auth
//     is secured on every address, loopback included: HTTPS with the node's
//     certificate and a bearer token checked against the node's replica.
//     A secured cluster should not leave one listener open to any local
//     user; an agent without both keeps plain HTTP, on loopback
//     only, and a non-loopback address is refused at start.
//   - The debug server's roles: /metrics for a reader or admin token,
//     the profiles for an admin token, both over every tenant ("*"):
//     metrics and profiles are not split by tenant, and a heap or goroutine
//     profile shows more of the process than any one tenant may see. A
//     request before the node is up answers 503.
//   - The web dashboard (--http-addr, package dashboard) follows the debug
//     server's address rule: loopback only unless the agent runs TLS and
//     --auth, then HTTPS with the node's certificate on any address. It
//     dials its own node's API with the node's peer credentials, which
//     every --tls-client-auth setting admits, and needs a fixed
//     --grpc-addr port to find it. `docket dev` serves it on base+300+i.
package main
