package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// defaultAddrs is the `docket dev` cluster, so the README tour needs no flags.
const defaultAddrs = "127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403"

type common struct {
	addr    string
	json    bool
	timeout time.Duration
	tenant  string
	token   string
	tls     tlsFiles
}

func commonFlags(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.addr, "addr", envOr("DOCKET_ADDR", defaultAddrs), "comma-separated node addresses (env DOCKET_ADDR)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up after this long")
	fs.StringVar(&c.tenant, "tenant", pb.DefaultTenant, "tenant")
	fs.StringVar(&c.token, "token", "", "bearer token for a cluster with --auth (env "+envToken+", which keeps it out of ps)")
	c.tls.flags(fs)
	return c
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// verb is one operator command after flag parsing.
type verb struct {
	fs  *flag.FlagSet
	c   *common
	out io.Writer
}

func runVerb(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := &verb{fs: fs, c: commonFlags(fs), out: stdout}
	setUsage(fs, name, stderr) // verbhelp.go
	if spec, ok := verbs[name]; ok {
		return spec.run(v, ctx, args)
	}
	return fmt.Errorf("%w: unknown verb %q", errUsage, name)
}

// parse parses flags that may follow positional arguments, and checks
// the count of positionals.
func (v *verb) parse(args []string, minPos, maxPos int, what string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(v.fs, args); err != nil {
			return nil, err
		}
		args = v.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || len(pos) > maxPos {
		return nil, fmt.Errorf("%w: docket %s %s", errUsage, v.fs.Name(), what)
	}
	return pos, nil
}

// withClient connects as the verb's flags say and runs fn with the
// client, under the verb's --timeout; the connection closes when fn
// returns. Every verb that calls the cluster goes through it, so none
// dials, bounds its call or closes on its own.
func (v *verb) withClient(ctx context.Context, fn func(context.Context, *client.Client) error) error {
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, c)
}

func (v *verb) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, v.c.timeout)
	addrs := splitList(v.c.addr)
	// A CA that cannot be read is client.WithTLS's to report.
	if cfg := probeTLS(v.c.tls); cfg != nil || v.c.tls.ca == "" {
		if err := probe(ctx, addrs, cfg, v.c.tls); err != nil {
			cancel()
			return nil, nil, nil, err
		}
	}
	opts := v.c.tls.options()
	if tok := v.c.token; tok != "" || os.Getenv(envToken) != "" {
		if tok == "" {
			tok = os.Getenv(envToken)
		}
		opts = append(opts, client.WithToken(tok))
	}
	if flagSet(v.fs, "tenant") {
		// Only when asked: with auth off, a tenant on a task id is checked.
		opts = append(opts, client.WithRequestTenant(v.c.tenant))
	}
	c, err := client.New(ctx, addrs, opts...)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("connect %s: %w", v.c.addr, err)
	}
	return c, ctx, func() { _ = c.Close(); cancel() }, nil
}

// print writes msgs as JSON (one object, or an array) or via the text func.
func (v *verb) print(text func(io.Writer), msgs ...proto.Message) error {
	if !v.c.json {
		text(v.out)
		return nil
	}
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		parts = append(parts, string(b))
	}
	if len(parts) == 1 {
		_, err := fmt.Fprintln(v.out, parts[0])
		return err
	}
	_, err := fmt.Fprintf(v.out, "[%s]\n", strings.Join(parts, ","))
	return err
}

// parseFenced parses the arguments of a verb on a claimed task: ID FENCE
// and up to maxPos-2 more. A fence that is not a number is a usage error,
// found before anything is dialled.
func (v *verb) parseFenced(args []string, maxPos int, what string) (pos []string, fence uint64, err error) {
	if pos, err = v.parse(args, 2, maxPos, what); err != nil {
		return nil, 0, err
	}
	if fence, err = strconv.ParseUint(pos[1], 10, 64); err != nil {
		return nil, 0, fmt.Errorf("%w: fence %q is not a number", errUsage, pos[1])
	}
	return pos, fence, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
