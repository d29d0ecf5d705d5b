package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/gossip"
)

// envGossipKey holds a gossip keyring (keys separated by newlines or
// commas) when no --gossip-key-file is given.
const envGossipKey = "DOCKET_GOSSIP_KEY"

// gossipKeys reads the keyring from file, else from DOCKET_GOSSIP_KEY
// (then removed from the environment); nil when neither has one.
func gossipKeys(file string) ([][]byte, error) {
	var text string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("gossip key file: %w", err)
		}
		text = string(b)
	} else {
		text = os.Getenv(envGossipKey)
		_ = os.Unsetenv(envGossipKey) // fails only for an invalid name
		text = replaceCommas(text)
	}
	keys, err := gossip.ParseKeys(text)
	if err != nil {
		return nil, err
	}
	if file != "" && len(keys) == 0 {
		return nil, fmt.Errorf("gossip key file %s holds no key", file)
	}
	return keys, nil
}

func replaceCommas(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ',' {
			b[i] = '\n'
		}
	}
	return string(b)
}

// watchGossipKeys reloads the keyring from file on SIGHUP until ctx ends
// or the returned stop is called. A file that fails to parse keeps the
// keys in use.
func watchGossipKeys(ctx context.Context, node *cluster.Node, file string, log *slog.Logger) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			keys, err := gossipKeys(file)
			if err == nil {
				err = node.SetGossipKeys(keys)
			}
			if err != nil {
				log.Error("gossip keyring not reloaded; the old one stays", "file", file, "err", err)
			}
		}
	}()
	return func() { signal.Stop(ch); cancel(); <-done }
}

// runGossip is `docket gossip keygen [--out FILE]`: a fresh gossip key,
// printed, or written to FILE with mode 0600. A shell redirect creates
// its file under the umask (0644 under the usual 022), so printing also
// tells stderr how to keep the key private.
func runGossip(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gossip keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the key to this file, mode 0600, refusing to replace one (default: print it)")
	if len(args) < 1 || args[0] != "keygen" {
		fmt.Fprintln(stderr, "usage: docket gossip keygen [--out FILE]")
		return errUsage
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: docket gossip keygen [--out FILE]", errUsage)
	}
	k, err := gossip.NewKey()
	if err != nil {
		return fmt.Errorf("gossip key: %w", err)
	}
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("gossip keygen: %w", err)
		}
		_, err = fmt.Fprintln(f, k)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("gossip keygen: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %s (mode 0600)\n", *out)
		return nil
	}
	fmt.Fprintln(stdout, k)
	fmt.Fprintln(stderr, "docket: keep the key private: (umask 077; docket gossip keygen > gossip.key), or docket gossip keygen --out gossip.key")
	return nil
}
