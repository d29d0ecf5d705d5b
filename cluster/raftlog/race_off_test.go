//go:build !race

package raftlog

// raceOn says the tests run under the race detector.
const raceOn = false
