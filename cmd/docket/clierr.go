package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/storage"
)

// Exit codes. README's "Exit codes" lists them; Test_CLIExitCodes holds
// every verb to them.
const (
	exitOK       = 0 // done as asked
	exitFailed   = 1 // the cluster refused or failed the request (wrong state, stale fence, too large, ...)
	exitUsage    = 2 // the command line is wrong: unknown verb or flag, missing argument, text that is not UTF-8
	exitNotFound = 3 // the task, token, server or schedule named does not exist (or is another tenant's)
	exitConnect  = 4 // no node could be reached, or TLS or the token was refused: fix the setup, not the request
	exitTimeout  = 5 // --timeout ended first (no leader reachable, or wait saw no end); the outcome may be unknown
	exitDiskFull = 6 // docket agent refused to start: the data dir's disk is full (storage.ErrDiskFull)
)

// exitCodes says in a few words what each exit code means, for every
// verb's -h.
var exitCodes = []struct {
	code int
	says string
}{
	{exitOK, "done"},
	{exitFailed, "refused by the cluster"},
	{exitUsage, "wrong command line"},
	{exitNotFound, "not found"},
	{exitConnect, "cannot connect (TLS, token)"},
	{exitTimeout, "--timeout ended first"},
	{exitDiskFull, "disk full at start (agent)"},
}

// exitCodesHelp is the exit codes' line of -h.
func exitCodesHelp() string {
	parts := make([]string, len(exitCodes))
	for i, e := range exitCodes {
		parts[i] = fmt.Sprintf("%d %s", e.code, e.says)
	}
	return "Exit codes: " + strings.Join(parts, ", ") + "."
}

var errUsage = errors.New("usage")

// failure is an error whose text is already the sentence to print, with
// its exit code.
type failure struct {
	code int
	msg  string
	err  error // the cause, for errors.Is
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.err }

// notFound turns the client's ErrNotFound into "not found: WHAT NAME", which says
// which argument was wrong; other errors pass through.
func notFound(err error, what, name, hint string) error {
	if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	msg := fmt.Sprintf("not found: %s %s", what, name)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return &failure{code: exitNotFound, msg: msg, err: err}
}

// noTask is notFound for a task id.
func noTask(err error, id string) error {
	return notFound(err, "task", id, "unknown id, another tenant's task, or purged after its retention")
}

func exitCode(err error) int {
	var f *failure
	var ce *connErr
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK // help asked for is no error
	case errors.As(err, &f):
		return f.code
	case errors.Is(err, storage.ErrDiskFull):
		return exitDiskFull
	case errors.Is(err, errUsage), isUTF8Error(err):
		return exitUsage
	case errors.As(err, &ce), errors.Is(err, client.ErrUnauthenticated), errors.Is(err, client.ErrPermissionDenied):
		return exitConnect
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrNoLeader), errors.Is(err, client.ErrOutcomeUnknown),
		errors.Is(err, context.DeadlineExceeded):
		return exitTimeout
	}
	return exitFailed
}

// isUTF8Error reports gRPC's refusal to marshal a string field that is not
// UTF-8: the request never left, and the text to fix is on the command line.
func isUTF8Error(err error) bool {
	return strings.Contains(err.Error(), "string field contains invalid UTF-8")
}

// describe is the sentence main prints for err: what went wrong and, for
// the errors a user fixes in the setup, how.
func describe(err error) string {
	var f *failure
	var ce *connErr
	var full *storage.DiskFullError
	switch {
	case errors.As(err, &f), errors.As(err, &ce):
		return err.Error()
	case errors.As(err, &full):
		// Its sentence names the disk, the space and the fix; the layers
		// that wrapped it on the way up add nothing an operator acts on.
		return full.Error()
	case isUTF8Error(err):
		return "invalid argument: a queue name, id, tenant or other text argument is not valid UTF-8"
	case errors.Is(err, client.ErrUnauthenticated):
		return fmt.Sprintf("the cluster refused the token (%s): pass --token or set DOCKET_TOKEN with a valid token "+
			"(docket dev: source DATA-DIR/env; an admin mints one with docket token create)", serverMessage(err))
	case errors.Is(err, client.ErrPermissionDenied):
		return fmt.Sprintf("the token may not do this (%s): use a token whose roles and tenants cover it "+
			"(docket token create --roles ROLE --tenants TENANT)", serverMessage(err))
	case errors.Is(err, client.ErrTooLarge) && strings.Contains(err.Error(), "received message larger than max"):
		return "too large: the request is above the node's message limit; a task's payload may be at most " +
			"1 MiB (the cluster's --max-payload)"
	case errors.Is(err, client.ErrNotFound):
		return "not found: " + serverMessage(err)
	}
	return err.Error()
}

// serverMessage is the node's own text of a status error, without the
// words its code already says.
func serverMessage(err error) string {
	// status.FromError of a wrapped error answers the whole text; the
	// node's own words are in the innermost status.
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return err.Error()
	}
	msg := se.GRPCStatus().Message()
	for _, p := range []string{"unauthenticated: ", "permission denied: ", "not found: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// checkText refuses a text argument that is not UTF-8 before it is sent:
// gRPC would refuse to marshal it, and call that Internal.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return &failure{code: exitUsage, err: client.ErrInvalidArgument,
			msg: fmt.Sprintf("invalid argument: the %s %q is not valid UTF-8", what, s)}
	}
	return nil
}

// checkPayload refuses a payload above limit before it is sent, naming
// the payload rule rather than gRPC's message limit, which a large
// payload hits first. read says the payload came from stdin, where only
// limit+1 bytes were read.
func checkPayload(n, limit int, read bool) error {
	if n <= limit {
		return nil
	}
	size := fmt.Sprintf("%d bytes", n)
	if read {
		size = fmt.Sprintf("more than %d bytes", limit)
	}
	return &failure{code: exitFailed, err: client.ErrTooLarge, msg: fmt.Sprintf(
		"too large: the payload is %s; a task's payload may be at most %d bytes (1 MiB unless the cluster runs "+
			"with a larger --max-payload; then pass the same --max-payload here)", size, limit)}
}

// parseFlags is fs.Parse with its errors marked as usage errors (exit 2);
// -h stays flag.ErrHelp (exit 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}
