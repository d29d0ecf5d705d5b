package main

import (
	"os"
	"testing"
)

// envRunMain makes the test binary act as the docket binary, so that
// `docket dev` under test can start its nodes from os.Executable() and a
// shell can run verbs with it, without a separate build.
const envRunMain = "DOCKET_TEST_RUN_MAIN"

// shellEnv is what `source data/dev/env` (or an operator's shell) sets for
// the verbs. The tests start clusters of their own and name them
// explicitly; inherited, these pointed the CLI tests at the dev cluster's
// CA and address instead, and 17 of them failed.
var shellEnv = []string{"DOCKET_ADDR", "DOCKET_TOKEN", "DOCKET_TLS_CA", "DOCKET_TLS_CERT", "DOCKET_TLS_KEY",
	"DOCKET_METRICS", "DOCKET_DASHBOARD", "DOCKET_BOOTSTRAP_TOKEN", "DOCKET_GOSSIP_KEY"}

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	for _, k := range shellEnv {
		if err := os.Unsetenv(k); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
