// Package health is what a node knows of its own ability to write and
// apply: episodes of Pebble background errors, write stalls and slow
// disks, failed Raft log appends (LogGuard), a stuck apply, and the
// ballast file that leaves an operator room on a full disk.
//
// What it must not do: decide to step down or stop (the node does, from
// Problems), or log a failure that goes on more than once per
// repeatLogEvery.
package health
