package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"syscall"
	"unsafe"
)

// Event types, as in Jepsen: an invocation, and its completion as ok (it
// happened), fail (it certainly did not happen) or info (unknown).
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
	// Start and Stop bracket a nemesis fault window.
	Start = "start"
	Stop  = "stop"
)

// Operation names (Event.F).
const (
	FEnqueue   = "enqueue"
	FClaim     = "claim"
	FHeartbeat = "heartbeat"
	FSubmit    = "submit"
	FNack      = "nack"
	FWrite     = "write" // the downstream fence register
	FFinal     = "final" // node statuses after the drain
	FNemesis   = "nemesis"
	FPhase     = "phase" // workload phase changes: run, drain, done
	FRead      = "read"  // a stale GetTask of one node: Node, Applied, Key = the answer
)

// Error classes in Event.Err that checkers rely on.
const (
	ErrStale = "stale_fence"
)

// Event is one line of history.jsonl. Times are CLOCK_MONOTONIC
// nanoseconds, shared by every process on the machine, so the controller's
// nemesis events and the workload's operations merge on one time line.
type Event struct {
	T     int64  `json:"t"`
	Proc  string `json:"proc"`
	Type  string `json:"type"`
	F     string `json:"f"`
	Op    int64  `json:"op,omitempty"` // links an invocation to its completion, per Proc
	Task  string `json:"task,omitempty"`
	Key   string `json:"key,omitempty"` // idempotency key of the enqueue (also the payload)
	Fence uint64 `json:"fence,omitempty"`
	Lease int64  `json:"lease_ns,omitempty"`
	Done  bool   `json:"already_done,omitempty"`
	Err   string `json:"err,omitempty"`
	Fault string `json:"fault,omitempty"`
	// Win numbers the nemesis's fault windows, so that a stop closes the
	// window its start opened when faults overlap (0 in histories from
	// before overlapping faults: the fault's name pairs them).
	Win int64 `json:"win,omitempty"`
	// Node and Applied: for FRead, the node asked and the applied index it
	// answered at.
	Node    string `json:"node,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
	// Detail: for a fault window, what exactly was done (the corrupted
	// file and offsets) and, on its Stop, how it ended (the corrupt node's
	// outcome); on a Fail nemesis event, the command and its error.
	Detail string `json:"detail,omitempty"`
	// Nodes: for FNemesis the nodes a fault hit; for FFinal each node's status.
	Nodes []NodeState `json:"nodes,omitempty"`
	// Queue names the feature queue of an op of the feature workload
	// (features.go); Delay is a Snooze's delay, or the execution timeout
	// of a claim with a deadline; Cancel is a Heartbeat's or a Cancel's
	// cancel_requested.
	Queue  string `json:"queue,omitempty"`
	Delay  int64  `json:"delay_ns,omitempty"`
	Cancel bool   `json:"cancel_requested,omitempty"`
	// Claims: on a claim's completion, how many claims the task has had,
	// this one included. Above 1 on a task's first claim in the history, a
	// claim the history does not show took it first: the client resends a
	// Claim whose answer was lost, and the lost one's lease runs out.
	Claims uint32 `json:"claims,omitempty"`
}

// NodeState is one node's answer to the final status call.
type NodeState struct {
	ID      string `json:"id"`
	Applied uint64 `json:"applied,omitempty"`
	Hash    string `json:"hash,omitempty"`
	Err     string `json:"err,omitempty"`
}

// Op is an invocation paired with its completion. An invocation without a
// completion is info, completing at +Inf.
type Op struct {
	Proc     string
	F        string
	Type     string // ok, fail, info
	Invoke   int64
	Complete int64 // math.MaxInt64 for info: it may take effect any time later
	Answered int64 // when the completion was recorded (0 if never), for latency plots
	Task     string
	Key      string
	Fence    uint64
	Lease    int64
	Done     bool
	Err      string
	Node     string // FRead: the node asked
	Applied  uint64 // FRead: the applied index of the answer
	Queue    string // the feature queue (features.go)
	Delay    int64  // a Snooze's delay; a claim's execution timeout
	Claims   uint32 // a claim's: the task's claims so far (Event.Claims)
	Cancel   bool   // a Heartbeat's or Cancel's cancel_requested
}

// Fault is one nemesis window.
type Fault struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes,omitempty"`
	Start int64    `json:"start"`
	End   int64    `json:"end"` // math.MaxInt64 when never healed
	// Detail says what the fault did (file and offsets for a corruption);
	// Outcome how it ended (for a corruption: did the node refuse, serve,
	// or need a wipe).
	Detail  string `json:"detail,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Win is the window's number (Event.Win); Finding what its heal found
	// short of the promise (ErrFinding), which fails the run.
	Win     int64  `json:"win,omitempty"`
	Finding string `json:"finding,omitempty"`
}

// FaultError is a fault that failed to apply: the run's verdict is fail.
type FaultError struct {
	Name string `json:"name"`
	T    int64  `json:"t"`
	Err  string `json:"err"` // the command and its error
}

// History is a parsed history.
type History struct {
	Ops    []Op
	Faults []Fault
	// FaultErrors are the faults that failed to apply.
	FaultErrors []FaultError
	Final       []NodeState
	Begin       int64 // first event time
	End         int64 // last event time
	// DrainAt is when the workload entered its drain phase (0 if never).
	DrainAt int64
	// DrainNote says why the drain ended early, if it did.
	DrainNote string
	// Deps are the parents of each task enqueued with dependencies (FDeps).
	Deps map[string][]string
}

// Now returns CLOCK_MONOTONIC in nanoseconds. Go's monotonic reading is
// private to a process; this one is the same in every process.
func Now() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	_, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		panic(fmt.Sprintf("clock_gettime: %v", e))
	}
	return ts.Nano()
}

// Recorder appends events to a JSONL file. Safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	w   *bufio.Writer
	f   *os.File
	ops map[string]int64
}

// NewRecorder creates (truncates) path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Recorder{w: bufio.NewWriter(f), f: f, ops: map[string]int64{}}, nil
}

// Record writes e, stamping T when zero.
func (r *Recorder) Record(e Event) {
	if e.T == 0 {
		e.T = Now()
	}
	b, _ := json.Marshal(e) // Event always marshals
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.Write(b)
	r.w.WriteByte('\n')
}

// Invoke records an invocation and returns its op id.
func (r *Recorder) Invoke(e Event) int64 {
	r.mu.Lock()
	r.ops[e.Proc]++
	id := r.ops[e.Proc]
	r.mu.Unlock()
	e.Type, e.Op = Invoke, id
	r.Record(e)
	return id
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil {
		r.f.Close()
		return fmt.Errorf("history flush: %w", err)
	}
	return r.f.Close()
}

// ReadEvents reads a JSONL history. A last line cut short (a process
// killed mid-write, as an interrupted run kills the workload) is dropped:
// everything before it is whole. A bad line anywhere else is an error.
func ReadEvents(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var bad error
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bad != nil {
			return nil, bad
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = fmt.Errorf("history line %d: %w", line, err)
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

// ReadHistoryFile reads and parses a history.jsonl.
func ReadHistoryFile(path string) (*History, []Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	evs, err := ReadEvents(f)
	if err != nil {
		return nil, nil, err
	}
	return Parse(evs), evs, nil
}

// Parse pairs invocations with completions. Events are sorted by time
// first (the merge of several files need not be).
func Parse(evs []Event) *History {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].T < evs[j].T })
	h := &History{}
	type key struct {
		proc string
		op   int64
	}
	open := map[key]int{}
	type winKey struct {
		name string
		win  int64
	}
	openFault := map[winKey]int{}
	for i, e := range evs {
		if i == 0 {
			h.Begin = e.T
		}
		h.End = max(h.End, e.T)
		switch {
		case e.F == FNemesis && e.Type == Start:
			names := make([]string, 0, len(e.Nodes))
			for _, n := range e.Nodes {
				names = append(names, n.ID)
			}
			openFault[winKey{e.Fault, e.Win}] = len(h.Faults)
			h.Faults = append(h.Faults, Fault{Name: e.Fault, Nodes: names, Start: e.T, End: math.MaxInt64, Detail: e.Detail, Win: e.Win})
		case e.F == FNemesis && e.Type == Fail:
			h.FaultErrors = append(h.FaultErrors, FaultError{Name: e.Fault, T: e.T, Err: e.Err})
		case e.F == FNemesis && e.Type == Stop:
			if i, ok := openFault[winKey{e.Fault, e.Win}]; ok {
				h.Faults[i].End = e.T
				h.Faults[i].Outcome = e.Detail
				h.Faults[i].Finding = e.Err
				delete(openFault, winKey{e.Fault, e.Win})
			}
		case e.F == FFinal:
			h.Final = e.Nodes
		case e.F == FDeps:
			h.parseDeps(e)
		case e.F == FPhase:
			if e.Key == "drain" {
				h.DrainAt = e.T
			}
			if e.Key == "done" && e.Err != "" {
				h.DrainNote = e.Err
			}
		case e.Type == Invoke:
			open[key{e.Proc, e.Op}] = len(h.Ops)
			h.Ops = append(h.Ops, Op{Proc: e.Proc, F: e.F, Type: Info, Invoke: e.T, Complete: math.MaxInt64,
				Task: e.Task, Key: e.Key, Fence: e.Fence, Lease: e.Lease, Node: e.Node, Queue: e.Queue, Delay: e.Delay})
		case e.Type == OK || e.Type == Fail || e.Type == Info:
			i, ok := open[key{e.Proc, e.Op}]
			if !ok {
				continue
			}
			delete(open, key{e.Proc, e.Op})
			op := &h.Ops[i]
			op.Type, op.Complete, op.Answered, op.Err, op.Done, op.Cancel = e.Type, e.T, e.T, e.Err, e.Done, e.Cancel
			if e.Task != "" {
				op.Task = e.Task
			}
			if e.Key != "" {
				op.Key = e.Key
			}
			if e.Fence != 0 {
				op.Fence = e.Fence
			}
			if e.Delay != 0 {
				op.Delay = e.Delay
			}
			if e.Claims != 0 {
				op.Claims = e.Claims
			}
			if e.Applied != 0 {
				op.Applied = e.Applied
			}
			if e.Type == Info {
				op.Complete = math.MaxInt64 // unknown: may take effect any time later
			}
		}
	}
	return h
}
