package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Test_SecretFrom: a file wins over the environment, the variable is
// removed from the environment once read, and an empty file is an error.
func Test_SecretFrom(t *testing.T) {
	const env = "DOCKET_TEST_SECRET"
	t.Setenv(env, " from-env\n")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := secretFrom(file, env); err != nil || s != "from-file" {
		t.Fatalf("file: %q %v", s, err)
	}
	if s, err := secretFrom("", env); err != nil || s != "from-env" {
		t.Fatalf("env: %q %v", s, err)
	}
	if _, ok := os.LookupEnv(env); ok {
		t.Fatal("the variable is still set")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secretFrom(empty, env); err == nil {
		t.Fatal("empty file accepted")
	}
}
