// Package dashboard is Docket's web dashboard, an operator console: the
// Cluster, Queues, Queue (a queue's tasks by state), Task, Dead letters
// and Live leases pages that `docket agent --http-addr` serves, and their
// actions (pause, resume and purge a queue, delete its dead letters;
// cancel, run now, requeue and reprioritise a task). It owns the pages,
// their templates and script, the login cookie, the form tokens and the
// rate history; it owns no rule about who may see or do what.
//
// # How it works
//
// The dashboard is a client of its own node's gRPC API (the generated
// docket.v1 stubs over one connection to --grpc-addr). Every call carries
// the viewer's token as its bearer token, so the API decides, once, what
// the viewer may see and do: a token sees the queues of its tenants only
// (Stats is filtered, GetTask of another tenant's task is NotFound), and
// actions need the admin role. The node forwards writes and linearizable
// reads to the leader as it does for any client. A call its node answers
// NOT_LEADER (nothing done; a follower answers so for a token its replica
// does not know, which may be one revoked or created a moment ago) is
// made once more on the leader, so only the leader's verdict on a token
// reaches the viewer. The Cluster page also
// asks every server of the configuration for its own Status (open, no
// token), over cached connections to at most 16 servers (the cache
// starts afresh when full, so servers that left do not fill it).
//
// Pages are html/template files and one small script, embedded: no Node
// build step. Pages that show changing state (Cluster, Queues, Live
// leases) poll: the script fetches the page's own URL every 2 s and swaps
// the <main> element, so the server renders one thing. The server keeps
// rate history: every 2 s it samples Stats and keeps each queue's last 90
// lifetime totals (QueueStats.totals, replicated) in a ring, bounded to
// 1,000 queues, and draws the sparklines from it, so a page opens with
// its rates drawn (rates.go says whose token samples under --auth).
//
// An action is a POST form that makes one API call and returns to the
// page it came from with a sentence (a one-time cookie) saying what
// happened. Destructive ones (purge, delete dead letters, cancel) first
// answer a confirmation page that repeats the form with confirm=yes, so
// they work without script. The pages show an action only to a token that
// may do it: the API has no call naming a token's roles, so a ListDead of
// the tenant (admin only) probes it, cached 15 s (roles.go). A refusal
// the API gives anyway shows as an error page with a way back.
//
// # Decisions and trade-offs
//
//   - A client, not a reader of the FSM: the dashboard cannot show what the
//     API would refuse, and a second implementation of tenant scoping and
//     roles cannot drift from the first. The cost is a loopback gRPC hop per
//     call and a linearizable read (a leader round trip) per Stats, ListDead
//     and ListTasks.
//   - With --auth, a login page takes a token and keeps its secret in a
//     cookie: HttpOnly (no script reads it), SameSite=Strict, Secure when
//     served over HTTPS, session-long (no Max-Age). The login is checked by
//     one stale GetTask of an impossible id: NotFound or PermissionDenied
//     mean the node knows the token, Unauthenticated that it does not.
//     Every page needs the cookie; a call answered Unauthenticated (revoked,
//     expired) clears it and sends the viewer back to the login page.
//     Cluster.Status needs no token, so the Cluster page checks it first.
//   - Without --auth the pages are open, and say so in their header.
//   - Actions are POST forms with a form token: an HMAC, under a key made
//     at start, of the viewer's token secret, so a form rendered for one
//     token does not work for another and a restart invalidates open forms.
//     Cross-origin unsafe requests are also refused by Sec-Fetch-Site and
//     Origin (net/http.CrossOriginProtection) before any handler runs.
//   - Requeueing selected dead letters calls RequeueDead by id, which the
//     API allows an admin over every tenant ("*") only; "requeue all" names
//     the queue and tenant, and a tenant's admin may do it.
//   - Dead letters and a queue's tasks are read with ListTasks, which a
//     reader may call: a reader sees the dead letters without the
//     controls. Without a queue named, the Dead letters page lists the
//     first 20 queues whose Stats count dead letters.
//   - "Run now" (retry) of a delayed task is UpdateTask with a run_at one
//     second before the dashboard's clock; the leader judges it against
//     its own, so a dashboard clock ahead of the leader's by more than
//     that leaves the task delayed for the difference.
//   - The current claim's fence is never rendered: the API hides it from
//     token holders and drops it from ListTasks, and no template names
//     the task's field or a running attempt's. Ended attempts' fences are
//     rendered where the API gave them: to admins of the task's tenant
//     (cluster.TaskFor), and on an open dashboard (auth off), where the
//     API hides nothing anyway. The page decides nothing itself.
//   - The Task page shows the task's record and its attempt history (the
//     FSM keeps the last 16 attempts from feature level 6 on): each
//     attempt's worker, claim time, lease expiry as of its last heartbeat,
//     end, result (completed, failed, nacked, expired, released, or
//     running) and error, with the completing attempt named and marked.
//     Claims before the level have no record, and the page says so.
//   - The Live leases page marks orphaned claims (ListTasks'
//     orphaned_task_ids: the leader saw the answer go undelivered and
//     could not put the task back), so an operator sees which leases
//     nobody holds. It is the leader's memory: a new leader knows none.
//   - Times are the leader-stamped ones from the record, shown in UTC. Lease
//     countdowns tick in the browser against its own clock, which is fine on
//     the loopback and approximate elsewhere; "last renewal" is
//     lease_until - lease, since every claim and heartbeat sets lease_until
//     to now + lease.
//   - Each call is bounded by 5 s, each listing by a page (50 tasks of a
//     state, 50 dead letters per queue, 100 running tasks per queue, 20
//     queues on Live leases and Dead letters, 4 Stats pages), and payloads
//     and results are cut to 512 bytes on screen (80 in tables).
package dashboard
