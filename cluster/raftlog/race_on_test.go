//go:build race

package raftlog

// raceOn says the tests run under the race detector, where each bit-flip
// round of the log checksum tests costs about thirty times its time without
// it (the bbolt round reads each damaged copy in a child process).
const raceOn = true
