package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// FuzzClaimBatchRequest feeds ClaimBatch arbitrary requests. Its input
// check either refuses with InvalidArgument or builds one Claim per item
// within the bounds the server promises (no wait, max_tasks summing to at
// most one Claim's); the RPC on an empty queue then answers every item,
// empty, or refuses with InvalidArgument, and never fails otherwise.
func FuzzClaimBatchRequest(f *testing.F) {
	seed := func(items ...*pb.ClaimRequest) {
		b, err := proto.Marshal(&pb.ClaimBatchRequest{Items: items})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(claimItem("q", "w", 1, time.Minute))
	seed(claimItem("q", "w", 0, 0), claimItem("q2", "w2", 3, time.Second))
	seed(&pb.ClaimRequest{Queue: "q", WaitNs: 1})
	seed(&pb.ClaimRequest{Queue: "", WorkerId: "w"})
	seed(claimItem("q", "w", 600, 0), claimItem("q", "w", 600, 0))
	seed(&pb.ClaimRequest{Queue: "q", LeaseNs: -1}, &pb.ClaimRequest{Queue: "q", Tenant: "t", MaxTasks: 1 << 31})
	seed()
	f.Add([]byte{0x0a, 0x02, 0x0a, 0xff})

	ts := mustServe(f, newMemNode(f, true, service.ServiceConfig{}), "", Config{})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pb.ClaimBatchRequest{}
		if proto.Unmarshal(data, req) != nil {
			return // the codec refuses it before ClaimBatch runs (Test_InvalidUTF8…)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		asked := proto.Clone(req).(*pb.ClaimBatchRequest) // claimBatchCommands fills defaults in req
		cmds, err := ts.srv.claimBatchCommands(ctx, req)
		if err != nil {
			if c := status.Code(toStatus(err)); c != codes.InvalidArgument {
				t.Fatalf("refusal %v is %v, want InvalidArgument", err, c)
			}
		} else {
			checkClaimBatchCommands(t, asked, cmds)
		}
		resp, rpcErr := ts.q.ClaimBatch(ctx, req)
		switch {
		case err != nil && status.Code(rpcErr) != codes.InvalidArgument:
			t.Fatalf("the check refused (%v) but the RPC answered %v", err, rpcErr)
		case err == nil && rpcErr != nil:
			t.Fatalf("the check passed but the RPC failed: %v", rpcErr)
		case err == nil && len(resp.GetItems()) != len(req.GetItems()):
			t.Fatalf("%d answers for %d items", len(resp.GetItems()), len(req.GetItems()))
		}
		for i, it := range resp.GetItems() {
			if len(it.GetTasks()) != 0 {
				t.Fatalf("item %d claimed %d tasks from a cluster that holds none", i, len(it.GetTasks()))
			}
		}
	})
}

// checkClaimBatchCommands asserts what claimBatchCommands promises of an
// accepted request: each item's own queue, tenant, worker and lease, with
// Claim's defaults where the item left them out.
func checkClaimBatchCommands(t *testing.T, req *pb.ClaimBatchRequest, cmds []*pb.Command) {
	t.Helper()
	if len(cmds) != len(req.GetItems()) || len(cmds) == 0 || len(cmds) > pb.MaxBatch {
		t.Fatalf("%d commands for %d items", len(cmds), len(req.GetItems()))
	}
	total := 0
	for i, cmd := range cmds {
		c := cmd.GetClaim()
		if c == nil || cmd.GetType() != pb.CommandType_COMMAND_TYPE_CLAIM {
			t.Fatalf("item %d became %v", i, cmd)
		}
		it := req.GetItems()[i]
		tenant := it.GetTenant()
		if tenant == "" {
			tenant = pb.DefaultTenant
		}
		if c.GetQueue() != it.GetQueue() || c.GetTenant() != tenant || c.GetWorkerId() != it.GetWorkerId() {
			t.Fatalf("item %d claims %q/%q for %q, asked %q/%q for %q", i, c.GetTenant(), c.GetQueue(), c.GetWorkerId(),
				it.GetTenant(), it.GetQueue(), it.GetWorkerId())
		}
		if it.GetLeaseNs() != 0 && c.GetLeaseNs() != it.GetLeaseNs() {
			t.Fatalf("item %d: lease %v, asked %v", i, time.Duration(c.GetLeaseNs()), time.Duration(it.GetLeaseNs()))
		}
		want := it.GetMaxTasks()
		if want == 0 {
			want = pb.DefaultMaxTasks
		}
		if c.GetMaxTasks() != want {
			t.Fatalf("item %d: max_tasks %d, asked %d", i, c.GetMaxTasks(), it.GetMaxTasks())
		}
		if c.GetMaxTasks() < 1 || c.GetMaxTasks() > pb.MaxBatch || c.GetLeaseNs() <= 0 {
			t.Fatalf("item %d: max_tasks %d lease %v", i, c.GetMaxTasks(), time.Duration(c.GetLeaseNs()))
		}
		total += int(c.GetMaxTasks())
	}
	if total > maxClaimBatchTasks {
		t.Fatalf("accepted max_tasks summing to %d", total)
	}
}

// FuzzFitClaimAnswer: whatever the tasks and the limit, the answer has one
// item per claim, carries every task once as sent or kept, stays within
// the limit whenever the empty answer does, serves a prefix of the items,
// and never splits an item's tasks.
func FuzzFitClaimAnswer(f *testing.F) {
	f.Add([]byte{1, 0, 3, 200}, 1024)
	f.Add([]byte{255, 255, 255}, 300)
	f.Add([]byte{}, 0)
	f.Add([]byte{0, 0, 9}, 10)
	f.Fuzz(func(t *testing.T, sizes []byte, limit int) {
		// Each byte is an item: its high 3 bits the task count, its low 5 bits
		// a payload size in units of 16 bytes.
		got := make([][]*pb.Task, len(sizes))
		total := 0
		for i, b := range sizes {
			for j := range int(b >> 5) {
				got[i] = append(got[i], &pb.Task{Id: fmt.Sprintf("%d-%d", i, j), Payload: make([]byte, 16*int(b&31))})
				total++
			}
		}
		resp, sent, kept := fitClaimAnswer(got, limit)
		if len(resp.GetItems()) != len(got) {
			t.Fatalf("%d answers for %d items", len(resp.GetItems()), len(got))
		}
		if len(sent)+len(kept) != total {
			t.Fatalf("sent %d + kept %d of %d tasks", len(sent), len(kept), total)
		}
		empty := proto.Size(&pb.ClaimBatchResponse{Items: make([]*pb.ClaimResponse, len(got))})
		if sz := proto.Size(resp); limit >= empty && sz > limit {
			t.Fatalf("answer of %d bytes over the limit %d", sz, limit)
		}
		var answered []string
		stopped := false
		for i, it := range resp.GetItems() {
			switch n := len(it.GetTasks()); {
			case n == 0 && len(got[i]) > 0 && !stopped:
				stopped = true
				// The first item left out must not have fitted.
				with := proto.Clone(resp).(*pb.ClaimBatchResponse)
				with.Items[i].Tasks = got[i]
				if limit >= empty && proto.Size(with) <= limit {
					t.Fatalf("item %d left out though the answer with it is %d bytes of %d", i, proto.Size(with), limit)
				}
			case n > 0 && stopped:
				t.Fatalf("item %d served after an item that was not", i)
			case n > 0 && n != len(got[i]):
				t.Fatalf("item %d got %d of its %d tasks", i, n, len(got[i]))
			}
			for _, task := range it.GetTasks() {
				answered = append(answered, task.GetId())
			}
		}
		if len(answered) != len(sent) {
			t.Fatalf("answer carries %d tasks, sent says %d", len(answered), len(sent))
		}
		once := map[string]int{}
		for i, task := range sent {
			if task.GetId() != answered[i] {
				t.Fatalf("sent[%d] is %s, the answer's is %s", i, task.GetId(), answered[i])
			}
			once[task.GetId()]++
		}
		for _, task := range kept {
			once[task.GetId()]++
		}
		for _, tasks := range got {
			for _, task := range tasks {
				if once[task.GetId()] != 1 {
					t.Fatalf("task %s is sent or kept %d times, want once", task.GetId(), once[task.GetId()])
				}
			}
		}
	})
}
