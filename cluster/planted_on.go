//go:build plantedbugs

package cluster

import "github.com/dockethq/docket/fsm"

// plantLeader tells the FSM whether this node leads, for the planted
// fault reaper-on-followers (fsm/planted_on.go). Only a build with the
// plantedbugs tag, which no release sets, has it.
func plantLeader(on bool) { fsm.PlantLeader(on) }
