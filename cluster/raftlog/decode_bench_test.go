package raftlog

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// BenchmarkAppendEntriesDecode decodes one AppendEntries request holding
// one entry of the given size, as a follower's raft.NetworkTransport
// does: a msgpack decoder over its 256 KiB connection buffer, with the
// handle raft makes (maxInitLen=0). Its codec grows a byte slice in steps of
// 256 KiB, copying what it read so far at each step, so an entry's
// decode costs O(size²/256 KiB): 4 MiB entries (a shared Enqueue of four
// 1 MiB tasks) take several times as long as with a handle that
// allocates the whole entry at once (maxInitLen=64 MiB), which raft does
// not let a caller set (BENCHMARKS.md, "Where the CPU goes").
//
//	go test ./cluster/raftlog -run '^$' -bench AppendEntriesDecode
func BenchmarkAppendEntriesDecode(b *testing.B) {
	for _, size := range []int{128 << 10, 1 << 20, 4 << 20} {
		req := raft.AppendEntriesRequest{Entries: []*raft.Log{{Index: 1, Term: 1, Data: make([]byte, size)}}}
		var wire bytes.Buffer
		if err := codec.NewEncoder(&wire, &codec.MsgpackHandle{}).Encode(&req); err != nil {
			b.Fatal(err)
		}
		for _, maxInit := range []int{0, 64 << 20} {
			b.Run(fmt.Sprintf("entry=%dKiB/maxInitLen=%d", size>>10, maxInit), func(b *testing.B) {
				h := &codec.MsgpackHandle{}
				h.MaxInitLen = maxInit
				b.SetBytes(int64(size))
				for b.Loop() {
					var got raft.AppendEntriesRequest
					if err := codec.NewDecoder(bufio.NewReaderSize(bytes.NewReader(wire.Bytes()), 256<<10), h).Decode(&got); err != nil {
						b.Fatal(err)
					}
					if len(got.Entries) != 1 || len(got.Entries[0].Data) != size {
						b.Fatalf("decoded %d entries", len(got.Entries))
					}
				}
			})
		}
	}
}
