package main

import (
	"flag"

	"github.com/dockethq/docket/transport"
)

// agentFloodFlags are the agent's bounds on what an outsider without a
// token can make a node hold or compute (transport/connguard.go,
// handshake.go, hashcache.go). Each defaults to transport's Default.
func agentFloodFlags(fs *flag.FlagSet, o *agentOpts) {
	fs.DurationVar(&o.api.UnprovenTimeout, "unproven-conn-timeout", transport.DefaultUnprovenTimeout,
		"close a client connection that has made no authenticated call (a valid token, a client certificate of the cluster CA, or any call when --auth is off) this long after it was accepted; Status and health without a token do not count")
	fs.IntVar(&o.api.MaxUnproven, "max-unproven-conns", transport.DefaultMaxUnproven,
		"client connections without an authenticated call held at once; past it the oldest of the address holding most is closed")
	fs.IntVar(&o.api.MaxUnprovenPerIP, "max-unproven-conns-per-ip", transport.DefaultMaxUnprovenPerIP,
		"client connections without an authenticated call held at once from one IP; past it a new one from there is closed at accept")
	fs.Float64Var(&o.api.UnprovenCallRate, "unproven-call-rate", transport.DefaultUnprovenCallRate,
		"calls a second (bursts of twice as many) that one IP's connections may make before an authenticated call; past it calls wait their turn, and past four waiting the connection is closed")
	fs.IntVar(&o.api.MaxHandshakes, "max-tls-handshakes", 0,
		"TLS handshakes computing at once on the client API; more wait for a slot, and one waiting on its peer holds none (0: half the CPUs, at least 1)")
	fs.DurationVar(&o.api.HashInterval, "hash-interval", transport.DefaultHashInterval,
		"shortest time between two keyspace hashes computed for Cluster.Status with_hash; callers in between share the last or wait for the next")
}
