// Package replica is the contract between a Raft member and the layers
// that propose through it: the Replica interface, the outcomes of a
// proposal that callers branch on, and the member's clock. It holds no
// state and imports no Raft.
//
// It is small on purpose: service, leader, check and membership all
// import it, and it imports nothing of cluster, so none of them reaches up
// into the node that assembles them.
package replica
