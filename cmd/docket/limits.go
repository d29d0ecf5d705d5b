package main

import (
	"errors"
	"fmt"
	"syscall"
)

// Descriptor plan defaults. fdPlan documents each.
const (
	defaultFDReserve    = 1536
	defaultRaftMaxConns = 128
	minConns            = 32
	debugMaxConns       = 16
	maxFileLimit        = 1 << 20 // Linux's default fs.nr_open; RLIM_INFINITY is clamped to it
)

// fdPlan divides the process's file descriptors between the connections
// it accepts and a reserve that connections never touch. Issue 9: about
// 20,000 idle HTTP/2 connections took every descriptor, Pebble then failed
// to open each SST it needed and the process died in its WAL rotation.
// Every accepted connection is a descriptor, so each listener is wrapped
// in a connlimit.Listener whose limit is its share of limit - reserve: a
// connection past it is closed at accept, and the stores keep the reserve.
type fdPlan struct {
	// Limit is RLIMIT_NOFILE after the agent raised its soft limit to the
	// hard limit (Go's runtime does the same at start since Go 1.19; the
	// agent does it again so that the number it plans with is the one in
	// force, and logs it). The hard limit is the operator's: ulimit -Hn,
	// or LimitNOFILE= in a systemd unit.
	Limit int

	// Reserve is what connections never get (--fd-reserve). Default 1536,
	// or half of Limit when that is less, so a node under a small limit
	// still starts with room for both. Two thirds of it go to Pebble's
	// table cache (PebbleFiles: 1024 by default, about Pebble's own 1000);
	// the rest covers Pebble's WAL, MANIFEST and directories, raft.db, a
	// snapshot being written and one being sent per follower, Raft's
	// outgoing pools (5 connections per peer), forwarding and discovery
	// connections, the debug server (at most 16 connections), logs and the
	// runtime's own descriptors: a few dozen on a 5-node cluster, so 512
	// leaves ample room.
	Reserve int

	// PebbleFiles bounds the files Pebble keeps open (cluster.Config
	// MaxOpenFiles): 2/3 of Reserve.
	PebbleFiles int

	// RaftConns bounds inbound Raft connections (--raft-max-conns,
	// cluster.Config.RaftMaxConns). Default 128 (about 8 per peer serves
	// 16 servers), or a quarter of what the reserve leaves when that is
	// less.
	RaftConns int

	// GRPCConns bounds client API connections (--max-conns). Default: all
	// that Reserve and RaftConns leave, 18,336 under a hard limit of
	// 20,000. A smaller --max-conns is kept; a larger one is an error, since
	// the limit could not honour it.
	GRPCConns int
}

// planFDs raises the file limit and divides it. Zero flags take defaults.
func planFDs(reserve, raftConns, grpcConns int) (fdPlan, error) {
	limit, err := raiseFileLimit()
	if err != nil {
		return fdPlan{}, err
	}
	return divideFDs(limit, reserve, raftConns, grpcConns)
}

// divideFDs is planFDs for a given limit.
func divideFDs(limit, reserve, raftConns, grpcConns int) (fdPlan, error) {
	p := fdPlan{Limit: limit, Reserve: reserve, RaftConns: raftConns}
	if p.Reserve <= 0 {
		p.Reserve = min(defaultFDReserve, limit/2)
	}
	budget := limit - p.Reserve
	if p.RaftConns <= 0 {
		p.RaftConns = min(defaultRaftMaxConns, budget/4)
	}
	p.GRPCConns = budget - p.RaftConns
	p.PebbleFiles = p.Reserve * 2 / 3
	if p.GRPCConns < minConns || p.RaftConns < 1 {
		return p, fmt.Errorf("%w: a file limit of %d leaves %d descriptors for connections after a reserve of %d (Raft %d, gRPC %d, want at least %d); raise it (ulimit -n, LimitNOFILE=) or lower --fd-reserve or --raft-max-conns",
			errUsage, limit, budget, p.Reserve, p.RaftConns, p.GRPCConns, minConns)
	}
	if grpcConns > p.GRPCConns {
		return p, fmt.Errorf("%w: --max-conns %d is more than the file limit of %d allows after a reserve of %d and %d Raft connections (%d); raise the limit or lower --max-conns",
			errUsage, grpcConns, limit, p.Reserve, p.RaftConns, p.GRPCConns)
	}
	if grpcConns > 0 {
		p.GRPCConns = grpcConns
	}
	return p, nil
}

// raiseFileLimit sets RLIMIT_NOFILE's soft limit to its hard limit and
// returns it.
func raiseFileLimit() (int, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("read the file limit: %w", err)
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			r = want
		} else if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) {
			return 0, fmt.Errorf("raise the file limit to %d: %w", r.Max, err)
		}
		// EPERM/EINVAL (a hard limit the kernel will not grant): plan with
		// the soft limit in force.
	}
	return int(min(r.Cur, maxFileLimit)), nil
}
