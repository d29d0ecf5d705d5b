package main

import (
	"errors"
	"testing"
)

// The descriptor plan keeps the reserve out of the connections' reach at
// every file limit, and refuses one it cannot honour.
func Test_DivideFDs(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		limit, reserve, raft, grpc int
		want                       fdPlan
	}{
		{name: "defaults under 20000", limit: 20000,
			want: fdPlan{Limit: 20000, Reserve: 1536, PebbleFiles: 1024, RaftConns: 128, GRPCConns: 18336}},
		{name: "small limit halves the reserve", limit: 1024,
			want: fdPlan{Limit: 1024, Reserve: 512, PebbleFiles: 341, RaftConns: 128, GRPCConns: 384}},
		{name: "tiny limit", limit: 256,
			want: fdPlan{Limit: 256, Reserve: 128, PebbleFiles: 85, RaftConns: 32, GRPCConns: 96}},
		{name: "flags kept", limit: 20000, reserve: 4000, raft: 64, grpc: 1000,
			want: fdPlan{Limit: 20000, Reserve: 4000, PebbleFiles: 2666, RaftConns: 64, GRPCConns: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := divideFDs(tc.limit, tc.reserve, tc.raft, tc.grpc)
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			if got.Reserve+got.RaftConns+got.GRPCConns > got.Limit {
				t.Fatalf("connections reach into the reserve: %+v", got)
			}
		})
	}
	for _, tc := range []struct {
		name                       string
		limit, reserve, raft, grpc int
	}{
		{"reserve leaves too little", 1024, 1000, 0, 0},
		{"reserve above the limit", 1024, 2048, 0, 0},
		{"max-conns above what is left", 20000, 0, 0, 19000},
	} {
		if _, err := divideFDs(tc.limit, tc.reserve, tc.raft, tc.grpc); !errors.Is(err, errUsage) {
			t.Errorf("%s: got %v, want a usage error", tc.name, err)
		}
	}
}
