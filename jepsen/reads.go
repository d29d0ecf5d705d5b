package jepsen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// appliedIndexHeader is the header in which GetTask names the applied index
// it read at; the harness imports only the client and the protos.
const appliedIndexHeader = docketv1.MetadataAppliedIndex

// maxFinalReads bounds the reads of the final comparison, per node.
const maxFinalReads = 3000

// reader reads a random acknowledged task from every node at once, with
// allow_stale, every 100 ms until ctx ends: each answer is recorded with
// the node and the applied index it was served at, for CheckReads.
func (w *workload) reader(ctx context.Context) {
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		sleepCtx(ctx, 100*time.Millisecond)
		w.knownMu.Lock()
		task := ""
		if len(w.known) > 0 {
			task = w.known[rand.IntN(len(w.known))]
		}
		w.knownMu.Unlock()
		if task != "" {
			w.readEvery(ctx, task)
		}
	}
}

// readAll reads every acknowledged task (up to maxFinalReads) from every
// node once the nodes have converged after the drain: the answers are at
// one applied index, so every task is compared across all nodes.
func (w *workload) readAll(ctx context.Context) {
	w.knownMu.Lock()
	tasks := append([]string(nil), w.known...)
	w.knownMu.Unlock()
	if len(tasks) > maxFinalReads {
		tasks = tasks[:maxFinalReads]
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			return
		}
		w.readEvery(ctx, t)
	}
}

func (w *workload) readEvery(ctx context.Context, task string) {
	var wg sync.WaitGroup
	for i := range w.conns {
		wg.Add(1)
		go func() { defer wg.Done(); w.readOne(ctx, i, task) }()
	}
	wg.Wait()
}

// readOne is one stale GetTask of node i. A NotFound answer is an answer
// too (Absent), at the applied index the node sends in its header.
func (w *workload) readOne(ctx context.Context, i int, task string) {
	proc, node := fmt.Sprintf("%sr%d", w.cfg.ProcPrefix, i), w.cfg.Nodes[i]
	op := w.rec.Invoke(Event{Proc: proc, F: FRead, Task: task, Node: node})
	c, cancel := context.WithTimeout(ctx, time.Second)
	var md metadata.MD
	res, err := docketv1.NewQueueClient(w.conns[i]).GetTask(c, &docketv1.GetTaskRequest{TaskId: task, Tenant: Tenant, AllowStale: true}, grpc.Header(&md))
	cancel()
	applied, answer := res.GetAppliedIndex(), ""
	switch {
	case err == nil:
		answer = TaskAnswer(res.GetTask())
	case status.Code(err) == codes.NotFound:
		answer = Absent
		if v := md.Get(appliedIndexHeader); len(v) == 1 {
			applied, _ = strconv.ParseUint(v[0], 10, 64)
		}
	}
	if answer == "" || applied == 0 {
		if err == nil {
			err = errors.New("no applied index in the answer")
		}
		w.rec.Record(Event{Proc: proc, Op: op, Type: Info, F: FRead, Task: task, Node: node, Err: err.Error()})
		return
	}
	w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FRead, Task: task, Node: node, Applied: applied, Key: answer})
}

// TaskAnswer is a read's observable answer: the state, fence and attempts
// for a reader, and a digest of the whole record, every field of which is
// a function of the applied log.
func TaskAnswer(t *docketv1.Task) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(t)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%s fence=%d attempts=%d #%s", t.GetState(), t.GetFence(), t.GetAttempts(), hex.EncodeToString(sum[:6]))
}
