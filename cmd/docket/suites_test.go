package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// systemRun is the -run filter of the Makefile's test-system target. A
// test it matches belongs in a file built only with the system tag: an
// untagged one would run in make test and again in make test-system.
var systemRun = regexp.MustCompile(`System`)

var testFunc = regexp.MustCompile(`^func (Test\w*)\(`)

// untaggedSystemTests names each test that make test-system selects but
// whose file make test also builds, as "path: name".
func untaggedSystemTests(root string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		tagged := false
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "//go:build ") && strings.Contains(line, "system") && !strings.Contains(line, "!system") {
				tagged = true
			}
			if m := testFunc.FindStringSubmatch(line); m != nil && !tagged && systemRun.MatchString(m[1]) {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel+": "+m[1])
			}
		}
		return sc.Err()
	})
	return found, err
}

// Test_EachTestRunsInOneSuite: make test-system selects only tests that make
// test does not build, so no test costs both suites its time.
func Test_EachTestRunsInOneSuite(t *testing.T) {
	found, err := untaggedSystemTests(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: matches test-system's -run %q but its file has no system build tag; rename it or tag its file", f, systemRun)
	}
}

// Test_UntaggedSuiteTestIsFound: the rule sees a planted untagged test
// and passes over a tagged one.
func Test_UntaggedSuiteTestIsFound(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a_test.go", "package a\n\nfunc Test_SystemPlain(t *testing.T) {}\nfunc Test_Other(t *testing.T) {}\n")
	write("b_test.go", "//go:build system\n\npackage a\n\nfunc Test_SystemTagged(t *testing.T) {}\n")
	found, err := untaggedSystemTests(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != "a_test.go: Test_SystemPlain" {
		t.Fatalf("found %q, want only a_test.go: Test_SystemPlain", found)
	}
}
