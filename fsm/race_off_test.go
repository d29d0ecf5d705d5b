//go:build !race

package fsm

// raceOn says the tests run under the race detector.
const raceOn = false
