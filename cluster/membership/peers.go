package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
)

// Peer is what a node knows of a server: its Raft identity and the gRPC
// address clients and forwarding use.
type Peer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	GRPCAddr string `json:"grpc_addr"`
	// Level is the feature level the server last announced (cluster/features.go);
	// 0 until it announced one. A later announcement replaces it, lower
	// too: a server rolled back before the latch holds the latch back.
	Level uint32 `json:"level,omitempty"`
	// GossipAddr lets a restarted node find the pool again without Join.
	GossipAddr string `json:"gossip_addr,omitempty"`
}

// Book maps server ids to peers. It is persisted in the data dir so a
// node restarted with only its data dir can still point clients at the
// leader before discovery has run.
type Book struct {
	path string
	mu   sync.Mutex
	byID map[string]Peer
}

// OpenBook reads the book at path; a missing file is an empty book.
func OpenBook(path string) (*Book, error) {
	b := &Book{path: path, byID: map[string]Peer{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read peers: %w", err)
	}
	var peers []Peer
	if err := json.Unmarshal(data, &peers); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	for _, p := range peers {
		b.byID[p.ID] = p
	}
	return b, nil
}

// Put records p, keeping known addresses that p leaves empty. It reports
// whether anything changed.
func (b *Book) Put(p Peer) bool {
	if p.ID == "" {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.byID[p.ID]
	if p.RaftAddr == "" {
		p.RaftAddr = old.RaftAddr
	}
	if p.GRPCAddr == "" {
		p.GRPCAddr = old.GRPCAddr
	}
	if p.Level == 0 {
		p.Level = old.Level
	}
	if p.GossipAddr == "" {
		p.GossipAddr = old.GossipAddr
	}
	if p == old {
		return false
	}
	b.byID[p.ID] = p
	return true
}

// Get returns the peer with id.
func (b *Book) Get(id string) (Peer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.byID[id]
	return p, ok
}

// All returns the peers sorted by id.
func (b *Book) All() []Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Peer, 0, len(b.byID))
	for _, p := range b.byID {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Save writes the book atomically (temp file, fsync, rename).
func (b *Book) Save() error {
	data, err := json.MarshalIndent(b.All(), "", "  ")
	if err != nil {
		return fmt.Errorf("encode peers: %w", err)
	}
	tmp := b.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("save peers: %w", err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("save peers: %w", err)
	}
	return os.Rename(tmp, b.path)
}
