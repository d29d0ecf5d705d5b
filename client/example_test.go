package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// These Examples run against a real node that TestMain serves, found
// through DOCKET_ADDR as after `source data/dev/env` (make run); `go test
// ./client` checks their Output.

// Resize is the payload of the Examples' thumbnail tasks: a typed worker
// decodes it from JSON.
type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// A producer and a typed worker in one program: the task's payload is a
// Resize encoded as JSON, and the handler's result is stored as JSON too.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	id, err := c.EnqueueJSON(ctx, "thumbnails", Resize{Image: "cat.png", Width: 200})
	if err != nil {
		log.Fatal(err)
	}

	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "thumbnails"},
		client.HandleResult(func(ctx context.Context, t *client.Task, r Resize) (string, error) {
			return fmt.Sprintf("%s at %dpx", r.Image, r.Width), nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	stop := runWorker(ctx, w)

	task, err := c.Wait(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	var thumb string
	if err := json.Unmarshal(task.Result, &thumb); err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.State, thumb)
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output: completed cat.png at 200px
}

// A producer sets a task's priority, attempts and start time with Task*
// options; the Client's own options are the With* ones given to New.
func ExampleClient_EnqueueJSON() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv(), client.WithAttemptTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	now, err := c.EnqueueJSON(ctx, "invoices", map[string]int{"order": 42},
		client.TaskPriority(9), client.TaskMaxAttempts(3))
	if err != nil {
		log.Fatal(err)
	}
	later, err := c.EnqueueJSON(ctx, "invoices", map[string]int{"order": 43},
		client.TaskDelay(time.Hour))
	if err != nil {
		log.Fatal(err)
	}

	for _, id := range []string{now, later} {
		t, err := c.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s priority %d, %d attempts, payload %s\n", t.State, t.Priority, t.MaxAttempts, t.Payload)
	}
	// Output:
	// pending priority 9, 3 attempts, payload {"order":42}
	// delayed priority 0, 5 attempts, payload {"order":43}
}

// Email is the payload of the worker Example.
type Email struct {
	To string `json:"to"`
}

// A typed worker: Handle decodes each task's payload as an Email. A nil
// error completes the task, Permanent fails it for good, and any other
// error gives it back for another attempt.
func ExampleHandle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var ids []string
	for _, e := range []Email{{To: "ada@example.com"}, {To: ""}} {
		id, err := c.EnqueueJSON(ctx, "email", e)
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, id)
	}

	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "email", Concurrency: 1},
		client.Handle(func(ctx context.Context, t *client.Task, e Email) error {
			if e.To == "" {
				// Sending again cannot help: fail the task for good.
				return client.Permanent(errors.New("no recipient"))
			}
			fmt.Println("sending to", e.To, "attempt", t.Attempt())
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	stop := runWorker(ctx, w)
	for _, id := range ids {
		t, err := c.Wait(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %q\n", t.State, t.LastError)
	}
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// sending to ada@example.com attempt 1
	// completed ""
	// failed "no recipient"
}

// A graph of tasks in one Enqueue: AfterIndex names earlier tasks of the
// same call, which either enqueues every task or none. A child waits
// until its parents completed, then reads their results.
func ExampleClient_Enqueue_dag() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	items, err := c.Enqueue(ctx,
		&docketv1.NewTask{Queue: "pipeline", Payload: []byte(`"fetch"`)},
		&docketv1.NewTask{Queue: "pipeline", Payload: []byte(`"resize"`), AfterIndex: []uint32{0}},
		&docketv1.NewTask{Queue: "pipeline", Payload: []byte(`"publish"`), AfterIndex: []uint32{1}},
	)
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		if err := client.ItemError(it); err != nil {
			log.Fatal(err)
		}
	}
	last := items[2].GetTaskId()
	t, err := c.Get(ctx, last)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("publish is", t.State)

	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "pipeline"},
		client.HandleResult(func(ctx context.Context, t *client.Task, step string) (string, error) {
			parents, err := t.GetParents(ctx)
			switch {
			case errors.Is(err, client.ErrNoParents):
				fmt.Println(step)
			case err != nil:
				return "", err
			default:
				fmt.Printf("%s after %s\n", step, parents[0].Result)
			}
			return step + " done", nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	stop := runWorker(ctx, w)
	if t, err = c.Wait(ctx, last); err != nil {
		log.Fatal(err)
	}
	fmt.Println("publish is", t.State)
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// publish is waiting
	// fetch
	// resize after "fetch done"
	// publish after "resize done"
	// publish is completed
}

// A recurring task: the cluster's leader enqueues one task per slot of
// the cron spec (here 03:00 UTC every day), from the put on. The node
// behind these Examples runs no leader loops, so nothing fires here;
// Fired counts the tasks a schedule enqueued.
func ExampleClient_PutSchedule() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, created, err := c.PutSchedule(ctx, &docketv1.Schedule{
		Name: "nightly-report", Queue: "reports", Spec: "0 3 * * *", Payload: []byte(`{"kind":"daily"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created", created, s.GetName(), s.GetSpec())

	all, err := c.ListSchedules(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range all {
		fmt.Printf("%s -> queue %s, fired %d\n", s.GetName(), s.GetQueue(), s.GetFired())
	}
	removed, err := c.RemoveSchedule(ctx, "", "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", removed)
	// Output:
	// created true nightly-report 0 3 * * *
	// nightly-report -> queue reports, fired 0
	// removed true
}

// Cancelling: a task that waits is cancelled at once; a running one is
// asked to stop, and its handler's ctx ends with cause ErrCancelRequested
// at the Worker's next heartbeat.
func ExampleClient_CancelTask() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	later, err := c.EnqueueJSON(ctx, "exports", "january", client.TaskDelay(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.CancelTask(ctx, later)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delayed task: requested", res.Requested, client.StateOf(res.State))

	started := make(chan struct{})
	causes := make(chan error, 1)
	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "exports", HeartbeatInterval: 100 * time.Millisecond},
		client.Handle(func(ctx context.Context, t *client.Task, month string) error {
			close(started)
			<-ctx.Done() // a long export, until told to stop
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		}))
	if err != nil {
		log.Fatal(err)
	}
	running, err := c.EnqueueJSON(ctx, "exports", "february")
	if err != nil {
		log.Fatal(err)
	}
	stop := runWorker(ctx, w)
	<-started
	if res, err = c.CancelTask(ctx, running); err != nil {
		log.Fatal(err)
	}
	fmt.Println("running task: requested", res.Requested, client.StateOf(res.State))
	t, err := c.Wait(ctx, running)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("handler's ctx:", <-causes)
	fmt.Println("running task ends", t.State, "with outcome", t.Outcome)
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// delayed task: requested false cancelled
	// running task: requested true running
	// handler's ctx: docket: cancel requested
	// running task ends cancelled with outcome cancelled
}

// Work runs one Worker until ctx ends: the quickstart program
// (client/examples/quickstart) in full, its handler stopping the Worker
// after one task.
func ExampleClient_Work() {
	type Email struct{ To string }
	ctx, stop := context.WithCancel(context.Background())
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnqueueJSON(ctx, "newsletter", Email{To: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := c.Work(ctx, client.WorkerConfig{Queue: "newsletter"}, client.Handle(func(_ context.Context, t *client.Task, e Email) error {
		fmt.Println("sending to", e.To, "attempt", t.Attempt())
		stop() // one task is enough here: Work submits it, then returns
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	// Output: sending to ada@example.com attempt 1
}

// Claiming by hand, without a Worker: each claimed TaskInfo carries its
// claim's Fence, which CompleteClaim, FailClaim and NackClaim send along,
// so that a caller whose lease ran out cannot finish the task.
func ExampleClient_ClaimTasks() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for _, n := range []string{"1", "2", "3"} {
		if _, err := c.EnqueueOne(ctx, "reports", []byte(n)); err != nil {
			log.Fatal(err)
		}
	}
	tasks, err := c.ClaimTasks(ctx, "reports", client.ClaimMax(10), client.ClaimLease(time.Minute), client.ClaimWait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tasks {
		if string(t.Payload) == "2" {
			state, err := c.NackClaim(ctx, t, time.Hour, "printer busy")
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("report", string(t.Payload), "is", state, "again")
			continue
		}
		if _, err := c.CompleteClaim(ctx, t, []byte("printed")); err != nil {
			log.Fatal(err)
		}
		done, err := c.Get(ctx, t.ID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("report %s is %s: %s\n", t.Payload, done.State, done.Result)
	}
	// Output:
	// report 1 is completed: printed
	// report 2 is delayed again
	// report 3 is completed: printed
}
