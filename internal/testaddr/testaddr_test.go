package testaddr

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Test_FreeNeverHandsOutAPortTwice: a port Free handed out is refused to
// a later call of the same process and to another process, for as long
// as the first holds it, though nothing listens on it yet.
func Test_FreeNeverHandsOutAPortTwice(t *testing.T) {
	if os.Getenv("TESTADDR_CHILD_PORT") != "" {
		port, err := strconv.Atoi(os.Getenv("TESTADDR_CHILD_PORT"))
		if err != nil {
			t.Fatal(err)
		}
		if reserve(port) {
			t.Fatalf("the child reserved port %d, which its parent holds", port)
		}
		return
	}
	addr := Free(t)
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	if !IsFree(addr) {
		t.Fatalf("%s is bound; Free must only reserve it", addr)
	}
	if reserve(port) {
		t.Fatalf("port %d reserved twice in one process", port)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^Test_FreeNeverHandsOutAPortTwice$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTADDR_CHILD_PORT="+strconv.Itoa(port))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	seen := map[string]bool{addr: true}
	for range 50 {
		a := Free(t)
		if seen[a] {
			t.Fatalf("Free handed out %s twice", a)
		}
		seen[a] = true
	}
}
