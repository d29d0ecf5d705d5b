package fsm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// The rule book's fair-queue directives (testdata/README.md).

// perKeyLimits reads limits' per-key arguments: per-key=N order=fifo|fair
// keep=newest|oldest|all depth=D.
func (w *scenario) perKeyLimits(d *datadriven.TestData, c *pb.SetQueueLimitsCmd) {
	if v, ok := w.arg(d, "per-key"); ok {
		c.MaxRunningPerKey = proto.Uint32(uint32(w.uint(v)))
	}
	if v, ok := w.arg(d, "order"); ok {
		o := pb.QueueOrder(pb.QueueOrder_value["QUEUE_ORDER_"+strings.ToUpper(v)])
		c.Order = &o
	}
	if v, ok := w.arg(d, "keep"); ok {
		k := pb.PerKeyPending(pb.PerKeyPending_value["PER_KEY_PENDING_KEEP_"+strings.ToUpper(v)])
		c.PerKeyPending = &k
	}
	if v, ok := w.arg(d, "depth"); ok {
		c.PerKeyPendingDepth = proto.Uint32(uint32(w.uint(v)))
	}
}

// keyLimit is `key-limit <queue> <key> [max-running=] [weight=]`.
func (w *scenario) keyLimit(d *datadriven.TestData) *pb.Command {
	if len(d.CmdArgs) < 2 {
		w.t.Fatalf("%s: key-limit <queue> <key>", d.Pos)
	}
	c := &pb.SetKeyLimitCmd{Queue: d.CmdArgs[0].Key, Tenant: w.tenant(d), Key: []byte(d.CmdArgs[1].Key)}
	if v, ok := w.arg(d, "max-running"); ok {
		c.MaxRunning = proto.Uint32(uint32(w.uint(v)))
	}
	if v, ok := w.arg(d, "weight"); ok {
		c.Weight = proto.Uint32(uint32(w.uint(v)))
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT, Now: w.now,
		Body: &pb.Command_SetKeyLimit{SetKeyLimit: c}}
}

// keys is `keys <queue>`: each listed key of the queue with its pending
// and running tasks and its limit, by key.
func (w *scenario) keys(d *datadriven.TestData) []string {
	res, err := w.h.f.Keys(w.name(d), w.tenant(d), MaxKeysLimit)
	if err != nil {
		w.t.Fatal(err)
	}
	if !res.GetKeyed() {
		return []string{"not keyed"}
	}
	all := res.GetByBacklog()
	sort.Slice(all, func(i, j int) bool { return string(all[i].GetKey()) < string(all[j].GetKey()) })
	out := []string{}
	for _, k := range all {
		line := fmt.Sprintf("%s pending=%d running=%d", k.GetKey(), k.GetPending(), k.GetRunning())
		if k.GetMaxRunning() > 0 {
			line += fmt.Sprintf(" limit=%d", k.GetMaxRunning())
		}
		if k.GetWeight() > 1 {
			line += fmt.Sprintf(" weight=%d", k.GetWeight())
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}
