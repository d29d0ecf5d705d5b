package main

import (
	"fmt"
	"os"
	"strings"
)

// Secrets (tokens) come from a file or the environment, never from a flag
// value: a flag shows in ps and in /debug/pprof/cmdline.
const (
	// envToken is the caller's token for every verb, and the token an
	// agent shows when it joins a cluster with auth on.
	envToken = "DOCKET_TOKEN"
	// envBootstrapToken is the bootstrap admin token's secret, read by an
	// agent on the cluster's first boot.
	envBootstrapToken = "DOCKET_BOOTSTRAP_TOKEN"
)

// secretFrom reads a secret from file when set, else from the
// environment variable env; "" when neither has one. The variable is then
// removed from this process's environment, so children do not inherit it.
func secretFrom(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read secret: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("secret file %s is empty", file)
		}
		return s, nil
	}
	s := strings.TrimSpace(os.Getenv(env))
	_ = os.Unsetenv(env) // fails only for an invalid name
	return s, nil
}
