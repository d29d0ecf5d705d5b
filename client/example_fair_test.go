package client_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dockethq/docket/client"
)

// A fair queue: each task carries its customer as its key, the queue runs
// at most one task per key at once and claims in fair order, so one
// customer's backlog does not hold the others' tasks back. A claim of ten
// takes one task of each key; ListKeys shows who holds the backlog.
func Example_fairQueue() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	one, fair := uint32(1), client.OrderFair
	if _, err := c.SetQueueLimits(ctx, "reports-by-customer", "", client.QueueLimits{MaxRunningPerKey: &one, Order: &fair}); err != nil {
		fmt.Println(err)
		return
	}
	for i := range 5 {
		if _, err := c.EnqueueOne(ctx, "reports-by-customer", fmt.Appendf(nil, "acme export %d", i), client.TaskKey("acme")); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := c.EnqueueOne(ctx, "reports-by-customer", []byte("globex export"), client.TaskKey("globex")); err != nil {
		fmt.Println(err)
		return
	}

	tasks, err := c.ClaimTasks(ctx, "reports-by-customer", client.ClaimMax(10), client.ClaimLease(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	var keys []string
	for _, t := range tasks {
		keys = append(keys, t.Key)
	}
	slices.Sort(keys)
	fmt.Println("claimed:", keys)

	ks, err := c.ListKeys(ctx, "reports-by-customer", "", 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	top := ks.GetByBacklog()[0]
	fmt.Printf("%s: %d pending, %d running (limit %d); %d keys active\n",
		top.GetKey(), top.GetPending(), top.GetRunning(), top.GetMaxRunning(), ks.GetKeys())
	// Output:
	// claimed: [acme globex]
	// acme: 4 pending, 1 running (limit 1); 2 keys active
}
