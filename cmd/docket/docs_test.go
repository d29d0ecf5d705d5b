package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A design document and a package comment say what is and why; the
// history of how it came to be lives in git log and BENCHMARKS.md. The
// two marks of history that slip in most are a commit hash and an issue
// number, and both go stale the day they are written.
var (
	// commitHash is a word of 7 to 40 lowercase hex digits; historyMarks
	// keeps it only with a digit and a letter in it, as a hash has and an
	// English word or a number has not.
	commitHash = regexp.MustCompile(`(?:^|[^\w/.-])([0-9a-f]{7,40})(?:$|[^\w/.-]|\.(?:$|\s))`)
	hasDigit   = regexp.MustCompile(`[0-9]`)
	hasHexAlph = regexp.MustCompile(`[a-f]`)
	// issueNumber is "issue 12", "issues 9/25", "issue #12" or "#12".
	issueNumber = regexp.MustCompile(`(?i)\bissues? #?\d+|(?:^|[^\w&])#\d+\b`)
)

// docsWithHistory lists the files whose history the rule waits for, by
// path from the module root: each is being rewritten by its owner, and
// leaves this list when it passes.
var docsWithHistory = map[string]bool{}

// historyMarks names each commit hash and issue number in text, one
// finding a line.
func historyMarks(text string) []string {
	var found []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		for _, m := range commitHash.FindAllStringSubmatch(l, -1) {
			if w := m[1]; hasDigit.MatchString(w) && hasHexAlph.MatchString(w) {
				found = append(found, fmt.Sprintf("line %d: commit hash %q", line, w))
			}
		}
		for _, m := range issueNumber.FindAllString(l, -1) {
			found = append(found, fmt.Sprintf("line %d: issue number %q", line, strings.TrimSpace(m)))
		}
	}
	return found
}

// moduleRoot is the folder of go.mod above the test's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = up
	}
}

// Test_DesignDocsCarryNoHistory holds every DESIGN.md and doc.go of the
// module to the rule above.
func Test_DesignDocsCarryNoHistory(t *testing.T) {
	root := moduleRoot(t)
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "vendor" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "DESIGN.md" && d.Name() != "doc.go" {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		seen++
		if docsWithHistory[rel] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range historyMarks(string(b)) {
			t.Errorf("%s, %s: history belongs in git log, not in a design", rel, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Fatalf("found %d DESIGN.md and doc.go files; the walk missed the module", seen)
	}
}

// Test_HistoryMarksCatchPlantedLines plants each kind of history mark,
// and lines that only look like one, so a rule that stopped matching (or
// began to match plain words and numbers) fails here.
func Test_HistoryMarksCatchPlantedLines(t *testing.T) {
	for _, line := range []string{
		"The group commit landed in 9c4e2f1.",
		"fixed by 21ff4a8b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f",
		"See issue 12 for the bound.",
		"issues 9/25 found it",
		"as #31 asked",
		"Issue #7 taught us",
	} {
		if got := historyMarks(line); len(got) == 0 {
			t.Errorf("no history found in %q", line)
		}
	}
	for _, line := range []string{
		"a deadbeef-free line with 1234567 tasks",
		"the 0123456 index, the facade, decade and acceded",
		"a cluster-id of 16 bytes, sha256 of the keyspace",
		"see fsm/DESIGN.md#decisions and &#39; in HTML",
		"docket-raft/<cluster id> in ALPN, 127.0.0.1:7000",
	} {
		if got := historyMarks(line); len(got) != 0 {
			t.Errorf("history found in %q: %v", line, got)
		}
	}
}
