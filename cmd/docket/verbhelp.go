package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// verbSpec is one operator verb: the method that runs it, and what
// `docket VERB -h` prints above its flags (how to call it, what it does,
// examples to copy). The verb's own flags are declared where it runs, and
// printed from its FlagSet; the flags every verb shares are commonFlags,
// and the exit codes exitCodes.
type verbSpec struct {
	run      func(*verb, context.Context, []string) error
	usage    string
	text     string
	examples []string
}

// verbs is the one table of operator verbs: main dispatches from it, -h
// reads it, and Test_VerbHelp holds every entry to a description and an
// example.
var verbs = map[string]verbSpec{
	"enqueue": {(*verb).enqueue, "docket enqueue QUEUE PAYLOAD [flags]",
		"Enqueue one task on QUEUE of --tenant and print its id and state. PAYLOAD '-' reads stdin. " +
			"The payload may be at most 1 MiB unless the cluster runs with a larger --max-payload.",
		[]string{"docket enqueue jobs 'resize image 42'", "docket enqueue jobs - --priority 9 < job.json",
			"docket enqueue reports weekly --delay 1h --key report-2026-w48", "docket enqueue jobs step2 --after ID1,ID2",
			"docket enqueue exports '{\"invoice\":7}' --task-key customer-42"}},
	"claim": {(*verb).claim, "docket claim QUEUE [flags]",
		"Claim up to -n tasks of QUEUE under a lease, and print each with its fence: pass the fence to submit, nack or snooze.",
		[]string{"docket claim jobs", "docket claim jobs -n 10 --lease 5m --wait 30s --worker w1"}},
	"submit": {(*verb).submit, "docket submit ID FENCE [RESULT] [flags]",
		"Complete a claimed task (or, with --failed, end it as failed) under the fence its claim returned. " +
			"A repeated submit with the same fence answers \"already submitted\".",
		[]string{"docket submit 000000000000000e0000 14 'done'", "docket submit 000000000000000e0000 14 --failed --error 'bad input'"}},
	"nack": {(*verb).nack, "docket nack ID FENCE [flags]",
		"Give a claimed task back for a retry (an attempt is counted; past max attempts it is dead-lettered).",
		[]string{"docket nack 000000000000000e0000 14 --reason 'upstream 503' --delay 30s"}},
	"task": {(*verb).task, "docket task ID [flags] | docket task update ID [--priority P] [--run-at T | --in D]",
		"Show a task: state, attempts, payload, result, its attempt history. " +
			"'task update' changes a pending or delayed task's priority or run time.",
		[]string{"docket task 000000000000000e0000", "docket task 000000000000000e0000 --json",
			"docket task update 000000000000000e0000 --priority 9 --in 10m"}},
	"tasks": {(*verb).tasks, "docket tasks QUEUE [--state pending|delayed|running|dead] [flags]",
		"List a queue's tasks in one state, a page at a time, as a table (--json: the ListTasks answer).",
		[]string{"docket tasks jobs", "docket tasks jobs --state running --limit 20"}},
	"snooze": {(*verb).snooze, "docket snooze ID FENCE [--for D] [flags]",
		"Hand a claimed task back to be claimed again after --for, without using an attempt.",
		[]string{"docket snooze 000000000000000e0000 14 --for 5m"}},
	"wait": {(*verb).wait, "docket wait ID [--timeout D] [flags]",
		"Wait, up to --timeout, for a task to finish, then show it. Exit code 5 when --timeout ends first.",
		[]string{"docket wait 000000000000000e0000 --timeout 1m"}},
	"cancel": {(*verb).cancel, "docket cancel ID [flags]",
		"Cancel a task: a pending or delayed one ends CANCELLED at once; a running one's worker is told to stop at its next heartbeat.",
		[]string{"docket cancel 000000000000000e0000"}},
	"stats": {(*verb).stats, "docket stats [QUEUE] [flags]",
		"Queue depths by state, every tenant's unless --tenant is given, with pause and limits in their own columns.",
		[]string{"docket stats", "docket stats jobs --tenant acme --json"}},
	"queues": {(*verb).queues, "docket queues [flags]",
		"Every queue the token may see, with its counts, pause and limits.",
		[]string{"docket queues"}},
	"queue": {(*verb).queue, "docket queue pause|resume|purge|reset QUEUE | queue retry QUEUE --base D [...] | queue dead-retention QUEUE D | queue limit QUEUE [...]",
		"Control one queue of --tenant: pause or resume its claims, purge its pending and delayed tasks, set its retry backoff, " +
			"how long it keeps dead letters, its concurrency and rate limits, or reset it to the defaults.",
		[]string{"docket queue pause jobs", "docket queue retry jobs --base 1s --cap 10m",
			"docket queue limit jobs --concurrency 10 --rate 50/s", "docket queue dead-retention jobs 72h",
			"docket queue limit exports --max-running-per-key 2 --order fair",
			"docket queue limit previews --per-key-pending keep-newest --per-key-depth 1"}},
	"key-limit": {(*verb).keyLimit, "docket key-limit QUEUE KEY [--max-running N] [--weight W]",
		"Override one key's per-key limit (the queue's --max-running-per-key) and its weight in the fair order, on a queue of --tenant. " +
			"A flag not given keeps the key's value; 0 clears it.",
		[]string{"docket key-limit exports customer-42 --max-running 10", "docket key-limit exports customer-7 --weight 3"}},
	"keys": {(*verb).keys, "docket keys QUEUE [--limit N] [flags]",
		"A keyed queue's top keys by backlog and by running, with each key's limit and weight, as two tables (--json: the ListKeys answer).",
		[]string{"docket keys exports", "docket keys exports --limit 50 --json"}},
	"schedule": {(*verb).schedule, "docket schedule add NAME --queue Q --cron SPEC [...] | schedule list | schedule remove NAME",
		"Recurring tasks of --tenant: add (or replace) a schedule that enqueues a task at every slot of a cron spec, list them with their next run, or remove one.",
		[]string{"docket schedule add nightly --queue reports --cron '0 3 * * *' --tz Europe/Paris --payload '{}'",
			"docket schedule add tick --queue jobs --cron '@every 1m'", "docket schedule list", "docket schedule remove nightly"}},
	"dlq": {(*verb).dlq, "docket dlq list [QUEUE] | dlq requeue QUEUE | dlq requeue --id ID | dlq purge QUEUE",
		"Dead letters of --tenant: list them (every queue without QUEUE), replay a queue's or one task, or delete a queue's.",
		[]string{"docket dlq list", "docket dlq requeue jobs", "docket dlq requeue --id 000000000000000e0000", "docket dlq purge jobs"}},
	"cluster": {(*verb).cluster, "docket cluster status | cluster transfer [ID] | cluster remove ID | cluster leave",
		"The Raft cluster: its leader, servers and health; move leadership; take a server out of the configuration; " +
			"or make the node first in --addr leave for good and stop.",
		[]string{"docket cluster status", "docket cluster transfer n2", "docket cluster remove n3",
			"docket cluster leave --addr 127.0.0.1:7403"}},
	"token": {(*verb).token, "docket token create --roles R --tenants T [--name N] [--ttl D] | token list | token revoke ACCESSOR",
		"Bearer tokens (an admin token over \"*\" is needed). create prints a secret once; list never shows one; revoke takes effect on every node.",
		[]string{"docket token create --roles producer,reader --tenants acme --name acme-api",
			"docket token create --roles worker --tenants '*' --ttl 720h", "docket token list", "docket token revoke 5f2c..."}},
	"snapshot": {(*verb).snapshot, "docket snapshot save FILE [--force] | snapshot restore FILE",
		"Back up the cluster's keyspace from the leader (save refuses to replace FILE without --force), or replace the keyspace with a backup: writes after the backup are lost.",
		[]string{"docket snapshot save backup-$(date +%F).snap", "docket snapshot restore backup-2026-11-26.snap"}},
	"dag": {(*verb).dag, "docket dag enqueue FILE.json",
		"Enqueue a graph of tasks with local names in one atomic call: all are stored, or none. FILE '-' reads stdin. " +
			"A cycle is refused before anything is sent.",
		[]string{"docket dag enqueue graph.json",
			`echo '{"queue":"jobs","tasks":[{"name":"fetch"},{"name":"resize","after":["fetch"]}]}' | docket dag enqueue -`}},
}

// commonFlagNames are the flags every verb shares; -h lists them apart.
var commonFlagNames = map[string]bool{"addr": true, "json": true, "timeout": true, "tenant": true, "token": true,
	"tls-ca": true, "tls-cert": true, "tls-key": true}

// setUsage makes fs's -h print the verb's doc, its own flags, then the
// flags every verb shares.
func setUsage(fs *flag.FlagSet, name string, w io.Writer) {
	fs.Usage = func() {
		d, ok := verbs[name]
		if !ok {
			d = verbSpec{usage: "docket " + name + " [flags]"}
		}
		fmt.Fprintf(w, "Usage: %s\n\n", d.usage)
		if d.text != "" {
			fmt.Fprintf(w, "%s\n\n", wrap(d.text, 76))
		}
		if len(d.examples) > 0 {
			fmt.Fprintln(w, "Examples:")
			for _, e := range d.examples {
				fmt.Fprintf(w, "  %s\n", e)
			}
			fmt.Fprintln(w)
		}
		printFlags(w, fs, "Flags:", func(n string) bool { return !commonFlagNames[n] })
		printFlags(w, fs, "Flags of every verb:", func(n string) bool { return commonFlagNames[n] })
		fmt.Fprintln(w, "\n"+exitCodesHelp())
	}
}

// printFlags prints the flags of fs that keep selects, as flag's own
// PrintDefaults does, under a title; nothing when none is selected.
func printFlags(w io.Writer, fs *flag.FlagSet, title string, keep func(string) bool) {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  -%s", f.Name)
		if typ != "" {
			fmt.Fprintf(&b, " %s", typ)
		}
		fmt.Fprintf(&b, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		}
		b.WriteString("\n")
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "%s\n%s", title, b.String())
	}
}

// wrap breaks text into lines of at most width columns, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if col+1+len(word) > width {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}
