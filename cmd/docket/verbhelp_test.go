package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Test_VerbHelp: every operator verb's -h has a usage line, a
// description and an example above its flags, and exits 0; token's -h
// explains what -roles and -tenants grant.
func Test_VerbHelp(t *testing.T) {
	for name := range verbs {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{name, "-h"}, &out, &errb)
		if code := exitCode(err); code != exitOK {
			t.Errorf("docket %s -h: exit %d (%v)", name, code, err)
		}
		help := errb.String()
		d, ok := verbs[name]
		if !ok || d.text == "" || len(d.examples) == 0 {
			t.Errorf("docket %s: no description or example in verbs", name)
			continue
		}
		for _, want := range []string{"Usage: docket " + name, "Examples:\n  docket " + name, "Flags of every verb:", "Exit codes:"} {
			if !strings.Contains(help, want) {
				t.Errorf("docket %s -h lacks %q:\n%s", name, want, help)
			}
		}
	}
	var errb bytes.Buffer
	if err := run(context.Background(), []string{"token", "create", "-h"}, &bytes.Buffer{}, &errb); exitCode(err) != exitOK {
		t.Fatalf("token create -h: %v", err)
	}
	for _, want := range []string{"producer (enqueue", "worker (claim", "'*' for every tenant", "e.g. acme,globex"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("token create -h lacks %q:\n%s", want, errb.String())
		}
	}
}

// Test_UsageNamesEveryVerb: `docket --help` is where a new user looks for
// what the binary can do, so every operator verb has a line in it.
func Test_UsageNamesEveryVerb(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for name := range verbs {
		if !strings.Contains(out.String(), "\n  docket "+name+" ") {
			t.Errorf("docket --help has no line for docket %s", name)
		}
	}
}
