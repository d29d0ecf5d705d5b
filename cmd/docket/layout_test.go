package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// layoutRows is the layout table of DESIGN.md (and README.md's Layout
// section): each top-level folder and the rows its packages may import.
// A sub-package belongs to its top-level folder's row, and a package may
// always import packages of its own row. "cmd" may import everything.
var layoutRows = map[string][]string{
	"proto":     nil,
	"storage":   {"proto"},
	"fsm":       {"storage", "proto"},
	"cluster":   {"fsm", "storage", "proto"},
	"transport": {"cluster", "proto"},
	"client":    {"proto"},
	"jepsen":    {"client", "proto"},
	"cmd":       {"*"},
	// internal holds small generic helpers that know nothing of Docket
	// (connlimit, lane, testwait): it imports nothing of ours, and every row may
	// import it.
	"internal": nil,
}

// listedPackage is the part of `go list -json` the layout rules read.
type listedPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	CgoFiles     []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// listed caches one `go list` of the module for the layout tests.
var listed struct {
	sync.Mutex
	mod  string
	pkgs []listedPackage
}

// listModule returns the module path and its packages, listed once.
func listModule(t *testing.T) (string, []listedPackage) {
	t.Helper()
	listed.Lock()
	defer listed.Unlock()
	if listed.pkgs == nil {
		listed.mod, listed.pkgs = goListModule(t)
	}
	return listed.mod, listed.pkgs
}

// goListModule runs `go list -json ./...` at the module root (found with
// `go env GOMOD`) and returns the module path and its packages.
func goListModule(t *testing.T) (string, []listedPackage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		t.Fatalf("go env GOMOD: not inside a module (%q)", gomod)
	}
	modCmd := exec.CommandContext(ctx, "go", "list", "-m")
	modCmd.Dir = root
	modPath, err := modCmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list -json ./... listed no packages")
	}
	return strings.TrimSpace(string(modPath)), pkgs
}

// layoutRow is the top-level folder of a package of module mod, or ""
// when the package is not in the module.
func layoutRow(mod, importPath string) (row string, ours bool) {
	rest, ok := strings.CutPrefix(importPath, mod)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "/")
	row, _, _ = strings.Cut(rest, "/")
	return row, true
}

// layoutViolations checks the import arrows of every package against the
// table. Only non-test imports are held to it: a test may reach across
// rows to set up real parts.
func layoutViolations(mod string, pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		row, _ := layoutRow(mod, p.ImportPath)
		allowed, known := layoutRows[row]
		if !known {
			bad = append(bad, fmt.Sprintf("package %s sits in %q, which is no folder of the layout table (%s)",
				p.ImportPath, row, strings.Join(slices.Sorted(mapKeys(layoutRows)), ", ")))
			continue
		}
		for _, imp := range p.Imports {
			to, ours := layoutRow(mod, imp)
			if !ours || to == row || to == "internal" || slices.Contains(allowed, "*") || slices.Contains(allowed, to) {
				continue
			}
			bad = append(bad, fmt.Sprintf("package %s (row %s) imports %s (row %s); %s may import only %s",
				p.ImportPath, row, imp, to, row, describeRow(allowed)))
		}
	}
	return bad
}

func describeRow(allowed []string) string {
	if len(allowed) == 0 {
		return "nothing of ours"
	}
	return strings.Join(allowed, ", ")
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Test_Layout enforces DESIGN.md's layout table on the module's packages:
// every package sits in a known top-level folder, sub-packages follow
// their parent's row, and imports only point down the table.
func Test_Layout(t *testing.T) {
	mod, pkgs := listModule(t)
	for _, v := range layoutViolations(mod, pkgs) {
		t.Error(v)
	}
}

// clusterArrows are the arrows between cluster's own packages (the
// table in cluster/DESIGN.md): each package of the cluster row and the
// packages of that row it may import. Leaves import none; the top
// package, the server's assembly, imports what it assembles; memnode, a
// stand-in for the assembled node, sits above it. A new sub-package
// needs its line here.
var clusterArrows = map[string][]string{
	"certs": nil, "gossip": nil, "health": nil, "peer": nil, "replica": nil,
	"raftlog":    {"certs", "peer"},
	"service":    {"replica"},
	"check":      {"replica"},
	"membership": {"gossip", "peer", "replica"},
	"leader":     {"replica", "service"},
	"": {"certs", "check", "gossip", "health", "leader", "membership",
		"peer", "raftlog", "replica", "service"},
	"memnode": {"", "peer", "replica", "service"},
	// nodetest starts real nodes for tests of the sub-packages.
	"internal/nodetest": {""},
}

// Test_LayoutClusterArrows holds cluster's packages to clusterArrows:
// a leaf such as replica or raftlog never reaches up into the node that
// uses it, and nothing but memnode imports the assembly.
func Test_LayoutClusterArrows(t *testing.T) {
	mod, pkgs := listModule(t)
	base := mod + "/cluster"
	sub := func(path string) (string, bool) {
		if path == base {
			return "", true
		}
		name, ok := strings.CutPrefix(path, base+"/")
		return name, ok
	}
	for _, p := range pkgs {
		from, ok := sub(p.ImportPath)
		if !ok {
			continue
		}
		allowed, known := clusterArrows[from]
		if !known {
			t.Errorf("package %s has no line in clusterArrows", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if to, ours := sub(imp); ours && !slices.Contains(allowed, to) {
				t.Errorf("package %s imports %s; cluster/%s may import only %v of cluster", p.ImportPath, imp, from, allowed)
			}
		}
	}
}

// testHelpers are the packages that exist for tests only: testwait, the
// tests' poll helper; nodetest, the harness of running nodes; memnode, the
// in-process stand-in for a node. Only tests, and the helpers themselves,
// import them.
var testHelpers = []string{"/internal/testwait", "/cluster/internal/nodetest", "/cluster/memnode"}

// Test_LayoutInternalTestHelpersStayInTests: no production package
// imports a test helper.
func Test_LayoutInternalTestHelpersStayInTests(t *testing.T) {
	mod, pkgs := listModule(t)
	helper := func(path string) bool {
		return slices.ContainsFunc(testHelpers, func(h string) bool { return path == mod+h })
	}
	for _, p := range pkgs {
		if helper(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if helper(imp) {
				t.Errorf("package %s imports %s outside its tests", p.ImportPath, imp)
			}
		}
	}
}

// Test_LayoutTransportHasNoFSM names the layout's headline rule on its
// own: transport reaches the state machine only through cluster.
func Test_LayoutTransportHasNoFSM(t *testing.T) {
	mod, pkgs := listModule(t)
	for _, p := range pkgs {
		if row, _ := layoutRow(mod, p.ImportPath); row != "transport" {
			continue
		}
		for _, imp := range p.Imports {
			if to, ours := layoutRow(mod, imp); ours && (to == "fsm" || to == "storage") {
				t.Errorf("package %s imports %s: transport must reach the state machine only through cluster", p.ImportPath, imp)
			}
		}
	}
}

// Test_LayoutPeerBenchmarksOwnModule: a program that only benchmarks a
// peer (a NATS comparison, say) lives in its own Go module, so that the
// peer's dependencies never enter this module's build. No package of this
// module, tests included, may import one.
func Test_LayoutPeerBenchmarksOwnModule(t *testing.T) {
	_, pkgs := listModule(t)
	for _, p := range pkgs {
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if peerImport(imp) {
				t.Errorf("package %s imports %s: a peer benchmark lives in its own module", p.ImportPath, imp)
			}
		}
	}
}

// peerPrefixes are the import paths of systems Docket is benchmarked
// against, which only a separate module may import.
var peerPrefixes = []string{"github.com/nats-io/"}

func peerImport(imp string) bool {
	for _, p := range peerPrefixes {
		if strings.HasPrefix(imp, p) {
			return true
		}
	}
	return false
}

// Test_LayoutFSMIsPure: fsm's non-test files import no os (nor os/...),
// never read the clock (time.Now, time.Since, time.Until) and start no
// goroutines. Apply must be a function of the log and the keyspace; the
// I/O around it (opening Pebble, the restore swap) belongs to storage.
func Test_LayoutFSMIsPure(t *testing.T) {
	mod, pkgs := listModule(t)
	found := false
	for _, p := range pkgs {
		if row, _ := layoutRow(mod, p.ImportPath); row != "fsm" {
			continue
		}
		found = true
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			path := filepath.Join(p.Dir, name)
			for _, v := range impurities(t, path) {
				t.Errorf("package %s, %s: %s", p.ImportPath, name, v)
			}
		}
	}
	if !found {
		t.Fatal("no fsm package listed")
	}
}

// clockFuncs are the time functions that read the wall clock.
var clockFuncs = []string{"Now", "Since", "Until"}

// impurities parses one Go file and names each os import, clock read and
// go statement in it.
func impurities(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var bad []string
	timeNames := map[string]bool{}
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", path, spec.Path.Value, err)
		}
		if imp == "os" || strings.HasPrefix(imp, "os/") {
			bad = append(bad, fmt.Sprintf("imports %q (line %d): fsm does no I/O; storage does", imp, fset.Position(spec.Pos()).Line))
		}
		if imp == "time" {
			name := "time"
			if spec.Name != nil {
				name = spec.Name.Name
			}
			if name == "." {
				bad = append(bad, fmt.Sprintf("dot-imports \"time\" (line %d): clock reads could not be seen", fset.Position(spec.Pos()).Line))
			}
			timeNames[name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			bad = append(bad, fmt.Sprintf("go statement (line %d): fsm starts no goroutines", fset.Position(n.Pos()).Line))
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && timeNames[x.Name] && slices.Contains(clockFuncs, n.Sel.Name) {
				bad = append(bad, fmt.Sprintf("reads the clock with time.%s (line %d): time enters fsm only as the command's now",
					n.Sel.Name, fset.Position(n.Pos()).Line))
			}
		}
		return true
	})
	return bad
}

// Test_LayoutChecksCatchViolations feeds the checks made-up packages and
// files that break each rule, so a check that silently stopped matching
// (a renamed field, a changed go list format) fails here.
func Test_LayoutChecksCatchViolations(t *testing.T) {
	const mod = "example.com/m"
	pkgs := []listedPackage{
		{ImportPath: mod + "/transport", Imports: []string{mod + "/fsm", mod + "/cluster", "fmt"}},
		{ImportPath: mod + "/cluster/raftlog", Imports: []string{mod + "/transport"}},
		{ImportPath: mod + "/cluster", Imports: []string{mod + "/cluster/raftlog", mod + "/fsm"}},
		{ImportPath: mod + "/jepsen/cmd/jepsen", Imports: []string{mod + "/jepsen", mod + "/client"}},
		{ImportPath: mod + "/cmd/docket/bench", Imports: []string{mod + "/fsm", mod + "/transport"}},
		{ImportPath: mod + "/tools/x"},
		{ImportPath: mod + "/proto/v1", Imports: []string{mod + "/storage"}, TestImports: []string{mod + "/fsm"}},
	}
	got := layoutViolations(mod, pkgs)
	want := []string{
		"package example.com/m/transport (row transport) imports example.com/m/fsm (row fsm); transport may import only cluster, proto",
		"package example.com/m/cluster/raftlog (row cluster) imports example.com/m/transport (row transport); cluster may import only fsm, storage, proto",
		`package example.com/m/tools/x sits in "tools", which is no folder`,
		"package example.com/m/proto/v1 (row proto) imports example.com/m/storage (row storage); proto may import only nothing of ours",
	}
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant %d of them", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if !peerImport("github.com/nats-io/nats.go") || peerImport("github.com/hashicorp/raft") {
		t.Error("peerImport does not tell a NATS import from another")
	}

	src := `package fsm

import (
	"os/signal"
	clock "time"
)

func f() {
	_ = clock.Now()
	_ = clock.Since(clock.Time{})
	_ = clock.Duration(1)
	go f()
	signal.Reset()
}
`
	path := filepath.Join(t.TempDir(), "bad.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found := impurities(t, path)
	for _, w := range []string{`imports "os/signal"`, "time.Now (line 9)", "time.Since (line 10)", "go statement (line 12)"} {
		if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("impurities missed %q; found %q", w, found)
		}
	}
	if len(found) != 4 {
		t.Errorf("impurities found %d, want 4: %q", len(found), found)
	}
}
