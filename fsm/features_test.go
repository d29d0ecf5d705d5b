package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func latchCmd(level uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL, Now: t0,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: level}}}
}

// The latch only rises, and it is state: it survives a reopen and is part
// of the keyspace the consistency check hashes.
func Test_FeatureLatchOnlyRises(t *testing.T) {
	h := newHarness(t)
	if got := h.f.EnabledLevel(); got != 0 {
		t.Fatalf("fresh FSM enabled level %d, want 0", got)
	}
	for _, c := range []struct{ set, want uint32 }{
		{LevelBatch, LevelBatch}, {LevelBase, LevelBatch}, {LevelTokens, LevelTokens}, {LevelCheck, LevelTokens}, {LevelTokens, LevelTokens},
	} {
		if res := h.apply(latchCmd(c.set)); pb.ResultError(res) != nil {
			t.Fatalf("latch %d: %v", c.set, pb.ResultError(res))
		}
		if got := h.f.EnabledLevel(); got != c.want {
			t.Fatalf("after latch %d: enabled %d, want %d", c.set, got, c.want)
		}
	}
	before, err := h.f.Hash()
	if err != nil {
		t.Fatal(err)
	}
	h.reopen()
	if got := h.f.EnabledLevel(); got != LevelTokens {
		t.Fatalf("after reopen: enabled %d, want %d", got, LevelTokens)
	}
	other := newHarness(t)
	other.apply(latchCmd(LevelBatch))
	for other.index < h.index {
		other.apply(latchCmd(LevelBase))
	}
	if h2, _ := other.f.Hash(); h2 == before {
		t.Fatal("keyspaces with different latches hash the same")
	}
	if res := h.apply(latchCmd(0)); pb.ResultError(res) == nil {
		t.Fatal("latch 0 accepted")
	}
}

// An older build (MaxLevel below a command's level) stops on the command,
// as one that does not know its type does, and says which level it needs:
// applying it would diverge from nothing, skipping it would.
func Test_OlderBuildStopsAndNamesTheLevel(t *testing.T) {
	cases := []struct {
		name string
		cmd  *pb.Command
		need uint32
	}{
		{"token", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN, Now: t0,
			Body: &pb.Command_RevokeToken{RevokeToken: &pb.RevokeTokenCmd{Accessor: "a"}}}, LevelTokens},
		{"latch above the build", latchCmd(LevelTokens), LevelTokens},
		{"batch", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: t0, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{
			Commands: []*pb.Command{enqueueCmd(t0, &pb.NewTask{Queue: "q", Tenant: "default", Payload: []byte("x")})}}}}, LevelBatch},
		{"pause", setPausedCmd(t0, "q", "default", true), LevelQueueControl},
		{"purge queue", purgeQueueCmd(t0, "q", "default", false, 10), LevelQueueControl},
		{"queue retry", setRetryCmd(t0, "q", "default", &pb.RetryPolicy{BaseNs: int64(time.Second)}), LevelRetries},
		{"snooze", snoozeCmd(t0, "0000000000000001", 1, 0), LevelRetries},
		{"update task", updateTaskCmd(t0, "0000000000000001", 3, 0), LevelRetries},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{t: t, dir: t.TempDir(), opts: Options{MaxLevel: LevelBase}}
			h.f = mustOpen(t, h.dir, h.opts)
			data := mustEncode(t, c.cmd)
			l := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data, Extensions: CommandExtension(data, CommandLevel(c.cmd))}
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				h.f.Apply(l)
				return ""
			}()
			if !strings.Contains(msg, fmt.Sprintf("feature level %d", c.need)) || !strings.Contains(msg, "upgrade this node") {
				t.Fatalf("apply on a level-%d build: %q; want a stop naming level %d", LevelBase, msg, c.need)
			}
			if got := h.f.AppliedIndex(); got != 0 {
				t.Fatalf("applied index %d after the stop", got)
			}
		})
	}
}

func Test_ExtensionLevel(t *testing.T) {
	data := []byte("cmd")
	for _, lvl := range []uint32{LevelBase, LevelTokens, 300} {
		if got := ExtensionLevel(&raft.Log{Extensions: CommandExtension(data, lvl)}); got != lvl {
			t.Fatalf("level %d read back as %d", lvl, got)
		}
	}
	if got := ExtensionLevel(&raft.Log{Extensions: CommandExtension(data, LevelBase)[:cmdSumLen]}); got != 0 {
		t.Fatalf("checksum-only extension read as level %d", got)
	}
	l := &raft.Log{Type: raft.LogCommand, Data: data, Extensions: CommandExtension(data, LevelTokens)}
	if err := VerifyCommand(l); err != nil {
		t.Fatalf("checksum with a level after it: %v", err)
	}
}

func Test_BuildLevelOverride(t *testing.T) {
	defer func(v string) { levelOverride = v }(levelOverride)
	for _, c := range []struct {
		v    string
		want uint32
	}{{"", FeatureLevel}, {"2", 2}, {"1", 1}, {"0", FeatureLevel}, {"99", FeatureLevel}, {"x", FeatureLevel}} {
		levelOverride = c.v
		if got := BuildLevel(); got != c.want {
			t.Errorf("override %q: level %d, want %d", c.v, got, c.want)
		}
	}
}

// Test_BuildLevelAllocatesNothing: apply asks for the build's level at
// every entry; without an override it parsed the empty string, and the
// parse's error was an allocation per entry.
func Test_BuildLevelAllocatesNothing(t *testing.T) {
	defer func(v string) { levelOverride = v }(levelOverride)
	levelOverride = ""
	if n := testing.AllocsPerRun(100, func() { _ = BuildLevel() }); n != 0 {
		t.Fatalf("BuildLevel allocated %v times a call", n)
	}
}
