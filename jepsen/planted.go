package jepsen

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Planted faults: known bugs compiled into a docket built with the
// plantedbugs tag (make build-planted), which no release sets, and turned
// on by DOCKET_PLANT in the agents' environment (RunConfig.Plant). The
// planted run (jepsen planted, make jepsen-planted) runs one short
// scenario without a fault, which must pass, and then once per fault,
// which must fail in the checkers named here: a harness that cannot
// catch a bug it knows proves nothing about the ones it does not.
const (
	PlantSubmitIgnoresFence   = "submit-ignores-fence"
	PlantAckBeforeCommit      = "ack-before-commit"
	PlantReaperOnFollowers    = "reaper-on-followers"
	PlantRequeueForgetsTask   = "requeue-forgets-task"
	PlantIdempotencyDuplicate = "idempotency-lets-duplicate"
	PlantQueueLimitOffByOne   = "queue-limit-off-by-one"
	// PlantKeyLimitOffByOne is fsm.PlantKeyLimitOffByOne: the per-key
	// limit lets one task more of a key run.
	PlantKeyLimitOffByOne = "key-limit-off-by-one"
)

// PlantEnv is the variable a planted build reads its faults from.
const PlantEnv = "DOCKET_PLANT"

// PlantedCase is one planted fault and the checkers that must each fail
// when it is on. The first case, with no fault, must pass every checker.
type PlantedCase struct {
	Plant string
	Catch []string
	// Why says how the fault shows in the history.
	Why string
}

// PlantedCases are the planted run's cases, the fault-free one first.
var PlantedCases = []PlantedCase{
	{Plant: "", Why: "the same scenario on the same build, every fault off: every checker passes"},
	{Plant: PlantSubmitIgnoresFence, Catch: []string{"stale-accepted", "double-completion"},
		Why: "a worker that stalled past its lease submits after another worker claimed the task: accepted under the older fence, then the new holder's Submit completes it a second time"},
	{Plant: PlantAckBeforeCommit, Catch: []string{"lost"},
		Why: "the isolated leader acknowledges enqueues that never commit"},
	{Plant: PlantReaperOnFollowers, Catch: []string{"split-brain"},
		Why: "followers requeue expired leases outside the log: their keyspaces leave the leader's"},
	{Plant: PlantRequeueForgetsTask, Catch: []string{"completed"},
		Why: "a nacked or expired task never comes back, though a claim once delivered it"},
	{Plant: PlantIdempotencyDuplicate, Catch: []string{"idempotent-retry"},
		Why: "the resent Enqueue of an acknowledged key stores a second task"},
	{Plant: PlantQueueLimitOffByOne, Catch: []string{"queue-limit"},
		Why: "a feature rule: the limit of " + LimitQueue + " lets one task more run than it was set to, and its four workers hold three at once"},
	{Plant: PlantKeyLimitOffByOne, Catch: []string{"per-key-limit"},
		Why: "a feature rule: the per-key limit of " + FairQueue + " lets one task more of a key run, and its eight workers hold three of the noisy key's at once"},
}

// PlantedFaults are the names of the planted faults.
func PlantedFaults() []string {
	var out []string
	for _, c := range PlantedCases {
		if c.Plant != "" {
			out = append(out, c.Plant)
		}
	}
	return out
}

// PlantedVerdict says whether one case's results are what it expects:
// nil when the fault-free case passed every checker, or when every
// checker the case names failed.
func PlantedVerdict(c PlantedCase, rs []Result) error {
	failed := map[string]bool{}
	var names []string
	for _, r := range rs {
		if r.Verdict == Violate {
			failed[r.Name] = true
			names = append(names, r.Name)
		}
	}
	if c.Plant == "" {
		if len(names) > 0 {
			return fmt.Errorf("the fault-free run failed %s", strings.Join(names, ", "))
		}
		return nil
	}
	var missed []string
	for _, want := range c.Catch {
		if !failed[want] {
			missed = append(missed, want)
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("planted %s was not caught by %s (failed: %s)", c.Plant, strings.Join(missed, ", "), orNone(names))
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// CheckPlantedBinaries checks that the release binary holds no planted
// fault (neither a fault's name nor PlantEnv: the compiler dropped every
// hook) and that the planted one holds them all, so the check itself can
// fail and the names here agree with the build's.
func CheckPlantedBinaries(release, planted string) error {
	rel, err := os.ReadFile(release)
	if err != nil {
		return fmt.Errorf("release binary: %w", err)
	}
	pl, err := os.ReadFile(planted)
	if err != nil {
		return fmt.Errorf("planted binary: %w", err)
	}
	var bad []string
	for _, name := range append(PlantedFaults(), PlantEnv) {
		if bytes.Contains(rel, []byte(name)) {
			bad = append(bad, "the release binary "+release+" holds "+name)
		}
		if !bytes.Contains(pl, []byte(name)) {
			bad = append(bad, "the planted binary "+planted+" lacks "+name)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("planted build: %s", strings.Join(bad, "; "))
	}
	return nil
}
