//go:build !plantedbugs

package cluster

// plantLeader does nothing without the plantedbugs tag; the tagged build
// tells the FSM's planted reaper whether this node leads (planted_on.go).
func plantLeader(bool) {}
