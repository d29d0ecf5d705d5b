package raftlog

// FlipRounds is how many damaged copies a bit-flip test reads: full is
// the count without the race detector. Under it a sixth: the rounds run on
// one goroutine, so the detector finds little in them, and at full count
// they were half of the package's time in `make test`, which runs the
// package again without the detector.
func FlipRounds(full int) int {
	if raceOn {
		return max(3, full/6)
	}
	return full
}
