package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `docket: a Raft-replicated task queue

Usage:
  docket agent [flags]           run one server node
  docket dev [flags]             run a local 3-node cluster on loopback, TLS and
                                 tokens on (--insecure: off); source DATA-DIR/env
  docket enqueue QUEUE PAYLOAD   enqueue a task (payload "-" reads stdin);
                                 --after ID[,ID] waits for those tasks to complete
  docket dag enqueue FILE.json   enqueue a graph of tasks with local names, atomically
  docket claim QUEUE             claim tasks under a lease
  docket submit ID FENCE [RESULT]  complete a claimed task
  docket nack ID FENCE           give a claimed task back for a retry
  docket task ID                 show a task
  docket task update ID [--priority P] [--run-at T|--in D]
                                 change a pending or delayed task
  docket tasks QUEUE [--state S] list a queue's pending|delayed|running|dead tasks
  docket snooze ID FENCE [--for D]  hand a claimed task back for later, no attempt used
  docket wait ID                 wait (up to --timeout) for a task to finish, show it
  docket cancel ID               cancel a task (a running one: ask its worker to stop)
  docket stats [QUEUE]           queue depths by state
  docket queues                  every queue with its counts and pause, across tenants
  docket queue pause|resume QUEUE  stop or restart claims of a queue (enqueues go on)
  docket queue purge QUEUE       delete a queue's pending and delayed tasks
  docket schedule add NAME --queue Q --cron SPEC [--tz ZONE] [--missed skip|catchup]
                                 enqueue a task at every slot of a cron spec (@every 1m too)
  docket schedule list|remove [NAME]  a tenant's schedules, or delete one
  docket queue retry QUEUE --base D [--cap D] [--multiplier N] [--jitter P]
                                 backoff between a queue's retries (--base 0 clears)
  docket queue dead-retention QUEUE D  keep a queue's dead letters D (0: 14 days)
  docket queue reset QUEUE       drop a queue's configuration (pause, limits, retry, retention)
  docket queue limit QUEUE [--concurrency N] [--rate R/s] [--burst B] [--clear]
                                 limit a queue's running tasks and claim rate (0 clears)
  docket queue limit --tenant-wide --concurrency N  limit a tenant's running tasks
  docket queue limit QUEUE --max-running-per-key N [--order fair]
                                 a fair queue: per-key running limit, round robin by key
  docket keys QUEUE              a keyed queue's top keys by backlog and running
  docket key-limit QUEUE KEY [--max-running N] [--weight W]
                                 override one key's limit and its fair share
  docket dlq list [QUEUE]        list dead letters (no QUEUE: every queue of --tenant)
  docket dlq requeue QUEUE|--id ID  replay dead letters
  docket dlq purge QUEUE         delete a queue's dead letters
  docket cluster status          leader, servers, indexes
  docket cluster transfer [ID]   move leadership
  docket cluster remove ID       take a server out of the configuration
  docket cluster leave           the node at --addr leaves the cluster and stops
  docket token create --roles R --tenants T [--name N] [--ttl D]
                                 mint a token (secret printed once)
  docket token list              accessors, names, roles, tenants, expiry
  docket token revoke ACCESSOR   revoke a token on every node
  docket snapshot save FILE      back up the cluster's keyspace (from the leader)
  docket snapshot restore FILE   replace the keyspace with a backup: later writes are lost
  docket tls ca [--dir D]        write a cluster CA (docket-ca.pem, docket-ca-key.pem)
  docket tls cert --server|--client [--name N] [--dns D] [--ip I]
                                 write a certificate signed by that CA
  docket gossip keygen           print a fresh gossip encryption key
  docket bench [flags]           load-test a fresh local cluster (or --addr):
                                 throughput, p50..p99.9, vs the raft ceiling
  docket version                 this build and the feature level it applies

Every verb takes --addr (comma-separated node addresses; default the
'docket dev' cluster), --json, --token (or DOCKET_TOKEN) for a cluster run
with 'docket agent --auth', and --tls-ca, --tls-cert, --tls-key for a
cluster that runs TLS. Run 'docket VERB -h' for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "docket:", describe(err))
		}
		os.Exit(exitCode(err))
	}
}

// run dispatches a verb; it is main without the process, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "agent":
		return runAgent(ctx, rest, stderr)
	case "dev":
		return runDev(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "tls":
		return runTLS(ctx, rest, stdout, stderr)
	case "gossip":
		return runGossip(rest, stdout, stderr)
	case "version", "--version":
		version(stdout)
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if _, ok := verbs[verb]; ok { // the operator verbs: verbs.go's table
		return runVerb(ctx, verb, rest, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown verb %q", errUsage, verb)
}
