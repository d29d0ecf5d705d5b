// Quickstart enqueues a task and works it with a typed worker: `source data/dev/env`, go run.
package main

import (
	"context"
	"log"

	"github.com/dockethq/docket/client"
)

func main() {
	type Email struct{ To string }
	ctx, stop := context.WithCancel(context.Background())
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnqueueJSON(ctx, "email", Email{To: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := c.Work(ctx, client.WorkerConfig{Queue: "email"}, client.Handle(func(_ context.Context, t *client.Task, e Email) error {
		log.Println("sending to", e.To, "attempt", t.Attempt())
		stop() // one task is enough here: Work submits it, then returns
		return nil
	})); err != nil {
		log.Fatal(err)
	}
}
