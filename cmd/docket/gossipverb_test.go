package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dockethq/docket/cluster/gossip"
)

// `docket gossip keygen` prints a key that a key file accepts, different
// each time.
func Test_GossipKeygen(t *testing.T) {
	var keys []string
	for i := 0; i < 2; i++ {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"gossip", "keygen"}, &out, &errb); err != nil {
			t.Fatalf("keygen: %v %s", err, errb.String())
		}
		k := strings.TrimSpace(out.String())
		if parsed, err := gossip.ParseKeys(k); err != nil || len(parsed) != 1 || len(parsed[0]) != gossip.KeySize {
			t.Fatalf("keygen printed %q: %v", k, err)
		}
		keys = append(keys, k)
	}
	if keys[0] == keys[1] {
		t.Fatal("two keygens printed the same key")
	}
}

// The keyring comes from --gossip-key-file (primary first) or from
// DOCKET_GOSSIP_KEY, which is then removed from the environment.
func Test_GossipKeysFromFileOrEnv(t *testing.T) {
	a, _ := gossip.NewKey()
	b, _ := gossip.NewKey()
	file := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(file, []byte(b+"\n"+a+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := gossipKeys(file)
	if err != nil || len(keys) != 2 {
		t.Fatalf("from file: %d keys, %v", len(keys), err)
	}
	if want, _ := gossip.ParseKeys(b); !bytes.Equal(keys[0], want[0]) {
		t.Fatal("the file's first key is not the primary")
	}
	t.Setenv(envGossipKey, a+","+b)
	if keys, err := gossipKeys(""); err != nil || len(keys) != 2 {
		t.Fatalf("from the environment: %d keys, %v", len(keys), err)
	}
	if v, ok := os.LookupEnv(envGossipKey); ok {
		t.Fatalf("%s still set (%q): children would inherit it", envGossipKey, v)
	}
	empty := filepath.Join(t.TempDir(), "empty.key")
	if err := os.WriteFile(empty, []byte("# nothing yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gossipKeys(empty); err == nil {
		t.Fatal("a key file with no key was accepted")
	}
	if keys, err := gossipKeys(""); err != nil || keys != nil {
		t.Fatalf("no file, no variable: %v %v, want plain gossip", keys, err)
	}
}

// Test_GossipKeyFileModes: keygen --out writes the key 0600 and refuses to
// replace a file; printing it tells stderr how to keep a redirect private;
// the agent warns about a key file that group or others may read.
func Test_GossipKeyFileModes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "gossip.key")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"gossip", "keygen", "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("keygen --out: %v", err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 || stdout.Len() != 0 {
		t.Fatalf("keygen --out: %v %v, printed %q; want a 0600 file and nothing printed", fi, err, stdout.String())
	}
	if keys, err := gossipKeys(out); err != nil || len(keys) != 1 {
		t.Fatalf("the file written: %d keys, %v", len(keys), err)
	}
	if err := run(context.Background(), []string{"gossip", "keygen", "--out", out}, &stdout, &stderr); err == nil {
		t.Fatal("keygen --out replaced an existing key file")
	}
	stderr.Reset()
	if err := run(context.Background(), []string{"gossip", "keygen"}, &stdout, &stderr); err != nil || !strings.Contains(stderr.String(), "umask 077") {
		t.Fatalf("keygen to stdout: %v, stderr %q; want the umask hint", err, stderr.String())
	}

	var logs bytes.Buffer
	log, err := newLogger(&logs, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	warnKeyFileMode(log, out)
	if logs.Len() != 0 {
		t.Fatalf("a 0600 key file was warned about: %s", logs.String())
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	warnKeyFileMode(log, out)
	if !strings.Contains(logs.String(), "readable by group or others") || !strings.Contains(logs.String(), "mode=0644") {
		t.Fatalf("a 0644 key file: log %q, want a warning", logs.String())
	}
}
