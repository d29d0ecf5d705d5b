package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/build/constraint"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	testFunc = regexp.MustCompile(`^func (Test\w*)\(`)
	// systemTarget finds the -run filter of the Makefile's test-system
	// target, so the rule reads the filter make uses, not a copy of it.
	systemTarget = regexp.MustCompile(`(?m)^test-system:\n\t[^\n]*-run '([^']+)'`)
)

// systemRun is the -run filter of the Makefile at root's test-system target.
func systemRun(root string) (*regexp.Regexp, error) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	m := systemTarget.FindSubmatch(mk)
	if m == nil {
		return nil, errors.New("no test-system target with a -run filter in the Makefile")
	}
	return regexp.Compile(string(m[1]))
}

// builtWithoutSystem says whether a file with the given build constraint
// (nil for none) is built when the system tag is off: make test builds it.
// Any other tag is taken as set, so only the system tag can exclude it.
func builtWithoutSystem(expr constraint.Expr) bool {
	return expr == nil || expr.Eval(func(tag string) bool { return tag != "system" })
}

// untaggedSystemTests names each test that run (test-system's filter)
// selects but whose file make test also builds, as "path: name".
func untaggedSystemTests(root string, run *regexp.Regexp) ([]string, error) {
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
		var expr constraint.Expr
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if constraint.IsGoBuild(line) {
				if expr, err = constraint.Parse(line); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			if m := testFunc.FindStringSubmatch(line); m != nil && run.MatchString(m[1]) && builtWithoutSystem(expr) {
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
	root := moduleRoot(t)
	run, err := systemRun(root)
	if err != nil {
		t.Fatal(err)
	}
	found, err := untaggedSystemTests(root, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: matches test-system's -run %q but make test builds its file too; rename it or tag its file system", f, run)
	}
}

// Test_UntaggedSuiteTestIsFound: the rule reads the Makefile's filter,
// sees a planted untagged test and one built only without the tag, and
// passes over a tagged one.
func Test_UntaggedSuiteTestIsFound(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a_test.go", "package a\n\nfunc Test_SystemPlain(t *testing.T) {}\nfunc Test_Other(t *testing.T) {}\n")
	write("b_test.go", "//go:build system\n\npackage a\n\nfunc Test_SystemTagged(t *testing.T) {}\n")
	write("c_test.go", "//go:build !system\n\npackage a\n\nfunc Test_SystemNegated(t *testing.T) {}\n")
	write("Makefile", "test-system:\n\tgo test -tags system -run 'System' ./...\n")
	run, err := systemRun(root)
	if err != nil {
		t.Fatal(err)
	}
	found, err := untaggedSystemTests(root, run)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a_test.go: Test_SystemPlain", "c_test.go: Test_SystemNegated"}
	if !slices.Equal(found, want) {
		t.Fatalf("found %q, want %q", found, want)
	}
}
