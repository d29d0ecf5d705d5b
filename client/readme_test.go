package client_test

import (
	"os"
	"strings"
	"testing"
)

// Test_READMEShowsTheQuickstart: the README's Go client section shows the
// quickstart program as it is, so the code a reader copies is the code
// `go build ./...` builds.
func Test_READMEShowsTheQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	prog, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatalf("read quickstart: %v", err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(prog)+"```\n") {
		t.Fatalf("README.md does not show client/examples/quickstart/main.go verbatim in a go block")
	}
	if n := strings.Count(string(prog), "\n"); n >= 30 {
		t.Fatalf("the quickstart has %d lines, want under 30", n)
	}
}
