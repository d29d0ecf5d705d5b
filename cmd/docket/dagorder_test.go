package main

import (
	"fmt"
	"slices"
	"testing"
)

// reverseChain is a DAG file of n tasks, each after the next one: the
// children come before their parents, the worst case for a scan that
// restarts from the file's start for each task it places.
func reverseChain(n int) dagFile {
	f := dagFile{Queue: "jobs", Tasks: make([]dagTask, n)}
	for i := range n {
		f.Tasks[i] = dagTask{Name: fmt.Sprintf("t%d", i)}
		if i+1 < n {
			f.Tasks[i].After = []string{fmt.Sprintf("t%d", i+1)}
		}
	}
	return f
}

// Test_DagOrderIsStable: parents first, the file's order wherever it is
// free, also over a 100,000-task chain. Its speed is BenchmarkDagOrder's
// to measure (rescanning the file per task took 9.6 s for 25,000): a
// timed assertion here failed on a loaded machine, not on slow code.
func Test_DagOrderIsStable(t *testing.T) {
	f := dagFile{Queue: "jobs", Tasks: []dagTask{
		{Name: "c", After: []string{"b", "a"}}, {Name: "a"}, {Name: "d"}, {Name: "b", After: []string{"a", "0000000000000001"}},
		{Name: "e", After: []string{"a", "a"}},
	}}
	names, tasks, err := dagTasks(f, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "d", "b", "c", "e"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	if !slices.Equal(tasks[3].GetAfterIndex(), []uint32{2, 0}) || !slices.Equal(tasks[2].GetAfter(), []string{"0000000000000001"}) {
		t.Fatalf("c after %v, b after ids %v", tasks[3].GetAfterIndex(), tasks[2].GetAfter())
	}
	if _, _, err := dagTasks(dagFile{Tasks: []dagTask{{Name: "x", After: []string{"y"}}, {Name: "y", After: []string{"x"}}, {Name: "z"}}}, ""); err == nil ||
		err.Error() != "the tasks x, y wait on each other in a cycle" {
		t.Fatalf("cycle: %v", err)
	}

	big := reverseChain(100_000)
	names, _, err = dagTasks(big, "")
	if err != nil {
		t.Fatalf("100,000 tasks: %v", err)
	}
	if names[0] != "t99999" || names[len(names)-1] != "t0" {
		t.Fatalf("reverse chain ordered %s..%s", names[0], names[len(names)-1])
	}
}

// BenchmarkDagOrder: ordering a DAG file costs O((tasks+edges) log tasks).
func BenchmarkDagOrder(b *testing.B) {
	for _, n := range []int{25_000, 100_000} {
		f := reverseChain(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := dagTasks(f, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
