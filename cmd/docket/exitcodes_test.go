package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Test_CLIExitCodes holds every verb to README's exit codes: 0 done, 1
// refused by the cluster, 2 a wrong command line, 3 not found, 4 no
// connection, 5 --timeout first. The rows run in order against one
// cluster; {id} and {fence} are a task claimed by the setup, {dead} is an
// unused file name and {snap} a backup the snapshot row writes.
func Test_CLIExitCodes(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	docket(t, addrs, "enqueue", "jobs", "x")
	m := regexp.MustCompile(`^(\S+) fence=(\d+) `).FindStringSubmatch(docket(t, addrs, "claim", "jobs"))
	if m == nil {
		t.Fatal("the setup's claim printed no task")
	}
	dir := t.TempDir()
	dag := filepath.Join(dir, "dag.json")
	if err := os.WriteFile(dag, []byte(`{"queue":"jobs","tasks":[{"name":"a"},{"name":"b","after":["a"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cycle := filepath.Join(dir, "cycle.json")
	if err := os.WriteFile(cycle, []byte(`{"queue":"jobs","tasks":[{"name":"a","after":["b"]},{"name":"b","after":["a"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	repl := strings.NewReplacer("{id}", m[1], "{fence}", m[2], "{dag}", dag, "{cycle}", cycle,
		"{snap}", filepath.Join(dir, "backup.snap"), "{dead}", filepath.Join(dir, "absent.snap"))
	closed := closedAddr(t)

	rows := []struct {
		args string
		want int
	}{
		// enqueue
		{"enqueue jobs y", exitOK},
		{"enqueue jobs", exitUsage},
		{"enqueue \xff y", exitUsage},
		{"enqueue jobs y --priority 99", exitFailed},
		{"enqueue jobs y --max-payload 0", exitFailed},
		{"enqueue jobs y --addr " + closed, exitConnect},
		// claim, then the claimed task's verbs
		{"claim jobs --wait 1ms", exitOK},
		{"claim", exitUsage},
		{"task {id}", exitOK},
		{"task nope", exitNotFound},
		{"task", exitUsage},
		{"task update nope --priority 3", exitNotFound},
		{"task update {id} --priority 3", exitFailed}, // running: only pending or delayed tasks change
		{"tasks jobs --state running", exitOK},
		{"tasks jobs --state sleeping", exitUsage},
		{"nack nope 1", exitNotFound},
		{"nack {id} notanumber", exitUsage},
		{"snooze nope 1", exitNotFound},
		{"snooze {id} 1", exitFailed}, // a stale fence
		{"submit nope 1", exitNotFound},
		{"submit {id}", exitUsage},
		{"submit {id} 1", exitFailed},
		{"submit {id} {fence} done", exitOK},
		{"submit {id} {fence} done", exitOK}, // already submitted: still done
		{"wait {id}", exitOK},
		{"wait nope", exitNotFound},
		{"wait", exitUsage},
		{"cancel nope", exitNotFound},
		{"cancel {id}", exitFailed}, // completed: nothing to cancel
		{"cancel", exitUsage},
		// reads
		{"stats", exitOK},
		{"stats a b", exitUsage},
		{"stats --addr " + closed, exitConnect},
		{"queues", exitOK},
		{"queues extra", exitUsage},
		// queue control
		{"queue pause jobs", exitOK},
		{"queue resume jobs", exitOK},
		{"queue purge jobs", exitOK},
		{"queue retry jobs --base 1s", exitOK},
		{"queue dead-retention jobs 1h", exitOK},
		{"queue dead-retention jobs forever", exitUsage},
		{"queue limit jobs --concurrency 5", exitOK},
		{"queue reset jobs", exitOK},
		{"queue reboot jobs", exitUsage},
		// schedules
		{"schedule add s1 --queue jobs --cron @hourly", exitOK},
		{"schedule add s2 --queue jobs --cron nonsense", exitFailed},
		{"schedule add s3", exitUsage},
		{"schedule list", exitOK},
		{"schedule remove s1", exitOK},
		{"schedule remove s1", exitNotFound},
		// dead letters
		{"dlq list", exitOK},
		{"dlq requeue jobs", exitOK},
		{"dlq requeue --id nope", exitNotFound},
		{"dlq purge jobs", exitOK},
		{"dlq", exitUsage},
		// DAGs
		{"dag enqueue {dag}", exitOK},
		{"dag enqueue {cycle}", exitUsage}, // refused before sending: the file is wrong
		{"enqueue jobs y --nope", exitUsage},
		{"dag enqueue {dead}", exitFailed},
		{"dag list x", exitUsage},
		// cluster
		{"cluster status", exitOK},
		{"cluster remove n99", exitNotFound},
		{"cluster remove", exitUsage},
		{"cluster reboot", exitUsage},
		// tokens: this cluster runs without --auth
		{"token list", exitOK},
		{"token revoke nope", exitNotFound},
		{"token", exitUsage},
		// backups
		{"snapshot save {snap}", exitOK},
		{"snapshot save {snap}", exitFailed}, // exists: --force overwrites
		{"snapshot save {snap} --force", exitOK},
		{"snapshot restore {dead}", exitFailed},
		{"snapshot", exitUsage},
		// local verbs
		{"version", exitOK},
		{"gossip keygen", exitOK},
		{"gossip", exitUsage},
		{"tls", exitUsage},
		{"agent --nope", exitUsage},
		{"dev --nodes 0", exitUsage},
		{"nope", exitUsage},
		{"enqueue -h", exitOK}, // help asked for is no error
	}
	for _, r := range rows {
		args := strings.Fields(repl.Replace(r.args))
		if timeoutArg(args) != nil && !strings.Contains(r.args, "--addr") {
			args = append(args, "--addr", addrs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errb bytes.Buffer
		err := run(ctx, append(args, timeoutArg(args)...), &out, &errb)
		cancel()
		if got := exitCode(err); got != r.want {
			msg := ""
			if err != nil {
				msg = describe(err)
			}
			t.Errorf("docket %s: exit %d, want %d (%s)", r.args, got, r.want, msg)
		}
	}
}

// timeoutArg gives the verbs that talk to a cluster a short --timeout, so
// that a row that waits (wait on a running task) cannot stall the table.
func timeoutArg(args []string) []string {
	switch args[0] {
	case "version", "gossip", "tls", "agent", "dev", "nope":
		return nil
	}
	if len(args) > 1 && args[1] == "-h" {
		return nil
	}
	return []string{"--timeout", "5s"}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
