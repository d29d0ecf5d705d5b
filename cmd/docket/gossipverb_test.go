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
