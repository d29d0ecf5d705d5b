// Package taskwire encodes and decodes a pb.Task by hand, as proto does.
//
// Apply encodes a task's record at every change of its state, decodes it
// at every command that names it, and counts its size against the tenant's
// bytes; the API sends claimed tasks in every claim answer. Through proto's
// reflection-driven codec that was a sixth of a leader's CPU in the batched
// cycle (BENCHMARKS.md). Replicas hash the bytes they store and count sizes
// into replicated state, so Append writes what
// proto.MarshalOptions{Deterministic: true} writes, byte for byte, Size
// answers proto.Size, and Decode sets what proto.Unmarshal sets:
// FuzzTaskCodec holds all three, and Test_TaskCodecKnowsEveryField fails
// when the message gains a field the codec does not know. Whatever the fast
// paths do not know (unknown fields, a field in another wire type, a
// malformed encoding) they leave to proto, which decides it.
package taskwire
