package client

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Test_WithEnv reads the CLI's variables: every non-empty address of
// DOCKET_ADDR, the token trimmed, and TLS only with a CA.
func Test_WithEnv(t *testing.T) {
	t.Setenv(EnvAddr, " 127.0.0.1:1 , ,127.0.0.1:2")
	t.Setenv(EnvToken, " secret\n")
	t.Setenv(EnvTLSCA, "")
	t.Setenv(EnvTLSCert, "")
	t.Setenv(EnvTLSKey, "")
	var cfg config
	WithEnv()(&cfg)
	if want := []string{"127.0.0.1:1", "127.0.0.1:2"}; !slices.Equal(cfg.addrs, want) || cfg.token != "secret" || cfg.err != nil || len(cfg.dialOpts) != 0 {
		t.Fatalf("addrs %q token %q err %v dial options %d; want %q, \"secret\", no error, no TLS", cfg.addrs, cfg.token, cfg.err, len(cfg.dialOpts), want)
	}

	t.Setenv(EnvTLSCert, "client.pem")
	cfg = config{}
	WithEnv()(&cfg)
	if cfg.err == nil || !strings.Contains(cfg.err.Error(), EnvTLSCA) {
		t.Fatalf("a client certificate without a CA: err = %v, want one naming %s", cfg.err, EnvTLSCA)
	}

	t.Setenv(EnvTLSCA, t.TempDir()+"/missing-ca.pem")
	t.Setenv(EnvTLSCert, "")
	cfg = config{}
	WithEnv()(&cfg)
	if cfg.err == nil {
		t.Fatalf("an unreadable CA file: no error")
	}
}

// Test_NewWithEnvAndNoAddress: without an address from New or the
// environment, New fails at once with ErrInvalidArgument.
func Test_NewWithEnvAndNoAddress(t *testing.T) {
	t.Setenv(EnvAddr, "")
	t.Setenv(EnvTLSCA, "")
	t.Setenv(EnvTLSCert, "")
	t.Setenv(EnvToken, "")
	if _, err := New(t.Context(), nil, WithEnv()); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrInvalidArgument", err)
	}
}
