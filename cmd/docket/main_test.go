package main

import (
	"os"
	"testing"
)

// envRunMain makes the test binary act as the docket binary, so that
// `docket dev` under test can start its nodes from os.Executable() and a
// shell can run verbs with it, without a separate build.
const envRunMain = "DOCKET_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}
