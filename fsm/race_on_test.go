//go:build race

package fsm

// raceOn says the tests run under the race detector, which makes the
// metamorphic tests' per-entry checks about 17 times slower.
const raceOn = true
