package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/dockethq/docket/fsm"
)

// version prints the build (the VCS revision Go stamped into the binary,
// or "devel") and the feature level it applies: what a server announces
// to the others and what a rolling upgrade waits for.
func version(w io.Writer) {
	rev, dirty := "devel", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if dirty {
		rev += "+modified"
	}
	fmt.Fprintf(w, "docket %s, feature level %d\n", rev, fsm.BuildLevel())
}
