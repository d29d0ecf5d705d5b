package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Meta is what a server announces about itself. It travels as memberlist
// node metadata (at most 512 bytes), so it stays small.
type Meta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	GRPCAddr string `json:"grpc,omitempty"`
	Version  string `json:"ver,omitempty"`
	// Features is the highest feature level the server's build supports
	// (fsm.FeatureLevel, or lower in a build linked with a lower level).
	Features uint32 `json:"feat"`
	// HasState is set once the server holds a Raft configuration: a
	// server with it is never part of a bootstrap.
	HasState bool `json:"state,omitempty"`
	// Unchecked is set while the server started from existing data and
	// no consistency check has passed on it yet: the leader runs one.
	Unchecked bool `json:"unchecked,omitempty"`
	// Leaving is announced just before a graceful leave, so that the
	// others tell it from a failure (memberlist v0.5's leave callback
	// does not say which it was).
	Leaving bool `json:"leaving,omitempty"`
	// Cluster is the id of the cluster this server belongs to, once it
	// knows it. A member that announces another cluster's id is refused
	// (peer.Identity); "" on either side is accepted.
	Cluster string `json:"cluster,omitempty"`
}

// Status is what the pool knows of a member.
type Status int

// Member states.
const (
	// StatusAlive: the member answers probes.
	StatusAlive Status = iota + 1
	// StatusFailed: the member stopped answering; it may come back (a
	// restart or a partition) or never.
	StatusFailed
	// StatusLeft: the member announced that it leaves for good.
	StatusLeft
)

func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusFailed:
		return "failed"
	case StatusLeft:
		return "left"
	}
	return "unknown"
}

// Member is one server of the pool as this node sees it.
type Member struct {
	Meta
	Addr   string    // gossip address
	Status Status    // alive, failed or left
	Since  time.Time // when Status last changed, by this node's clock
}

// Config configures one node's membership in the pool.
type Config struct {
	// BindAddr is the host:port gossip binds (UDP and TCP) and advertises.
	// Port 0 picks a free one (tests).
	BindAddr string
	// Meta is this server's announcement; its ID is the memberlist name.
	Meta Meta
	// Keys is the keyring, primary first; nil or empty: plain gossip.
	Keys [][]byte
	// Local selects timings for loopback (tests, docket dev): failures are
	// seen in about a second instead of 5-10 s.
	Local bool
	// OnChange, when set, is called after any member joins, changes or
	// leaves, on memberlist's goroutine: it must not block.
	OnChange func()
	// Logger receives memberlist's logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Gossip is this node's membership in the pool. It is safe for
// concurrent use.
type Gossip struct {
	ml       *memberlist.Memberlist
	keyring  *memberlist.Keyring
	log      *slog.Logger
	onChange func()
	addr     string // advertised gossip address, fixed at New

	mu      sync.Mutex
	meta    Meta
	members map[string]Member
	now     func() time.Time
	refused map[string]string // member name -> the other cluster it named, logged once
}

// ErrKeyringFixed means SetKeys was asked to switch encryption on or off,
// which memberlist fixes at start: restart every node instead.
var ErrKeyringFixed = errors.New("gossip encryption cannot be switched on or off while running")

// New binds the gossip listener and starts the pool with this node alone.
// Join connects it to others.
func New(cfg Config) (*Gossip, error) {
	if cfg.Meta.ID == "" {
		return nil, errors.New("gossip: id is required")
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	g := &Gossip{log: log, onChange: cfg.OnChange, meta: cfg.Meta, members: map[string]Member{}, now: time.Now}
	mc := memberlist.DefaultLANConfig()
	if cfg.Local {
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.PushPullInterval = 2 * time.Second
	}
	mc.Name = cfg.Meta.ID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	mc.Delegate = (*delegate)(g)
	mc.Events = (*events)(g)
	mc.Alive = (*filter)(g)
	mc.Merge = (*filter)(g)
	mc.Logger = newStdLogger(log)
	if len(cfg.Keys) > 0 {
		if g.keyring, err = memberlist.NewKeyring(cfg.Keys, cfg.Keys[0]); err != nil {
			return nil, fmt.Errorf("gossip keyring: %w", err)
		}
		mc.Keyring = g.keyring
	}
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("gossip on %s: %w", cfg.BindAddr, err)
	}
	// LocalNode's fields change under memberlist's lock on every meta
	// update, so the address is read once, before anyone else runs.
	n := g.ml.LocalNode()
	g.addr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	return g, nil
}

// Addr is the gossip address this node advertises (with the bound port).
func (g *Gossip) Addr() string { return g.addr }

// Encrypted reports whether gossip runs with a keyring.
func (g *Gossip) Encrypted() bool { return g.keyring != nil }

// Join contacts the given gossip addresses and merges their view of the
// pool into this node's. It returns how many answered; an error only when
// none did.
func (g *Gossip) Join(addrs []string) (int, error) {
	n, err := g.ml.Join(addrs)
	if n > 0 {
		return n, nil
	}
	if err != nil {
		return 0, fmt.Errorf("gossip join %v: %w", addrs, err)
	}
	return 0, nil
}

// Members returns every member this node knows, itself included, sorted
// by id.
func (g *Gossip) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Alive counts the alive members, this node included.
func (g *Gossip) Alive() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := 0
	for _, m := range g.members {
		if m.Status == StatusAlive {
			c++
		}
	}
	return c
}

// Forget drops a member that is not alive, so the table does not grow
// with every server that ever existed. An alive member is kept.
func (g *Gossip) Forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[id]; ok && m.Status != StatusAlive {
		delete(g.members, id)
	}
}

// SetMeta changes this node's announcement and gossips it when it
// changed.
func (g *Gossip) SetMeta(edit func(*Meta)) error {
	g.mu.Lock()
	old := g.meta
	edit(&g.meta)
	changed := g.meta != old
	g.mu.Unlock()
	if !changed {
		return nil
	}
	if err := g.ml.UpdateNode(5 * time.Second); err != nil {
		return fmt.Errorf("gossip meta update: %w", err)
	}
	return nil
}

// SetKeys replaces the keyring: keys[0] becomes the primary (the one that
// encrypts), every key decrypts, and keys no longer listed are dropped.
// Adding happens before switching the primary, and switching before
// removing, so no step leaves a key in use that is not installed.
func (g *Gossip) SetKeys(keys [][]byte) error {
	if g.keyring == nil || len(keys) == 0 {
		if g.keyring == nil && len(keys) == 0 {
			return nil
		}
		return ErrKeyringFixed
	}
	for _, k := range keys {
		if err := g.keyring.AddKey(k); err != nil {
			return fmt.Errorf("gossip keyring add: %w", err)
		}
	}
	if err := g.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("gossip keyring primary: %w", err)
	}
	keep := map[string]bool{}
	for _, k := range keys {
		keep[string(k)] = true
	}
	for _, k := range g.keyring.GetKeys() {
		if !keep[string(k)] {
			if err := g.keyring.RemoveKey(k); err != nil {
				return fmt.Errorf("gossip keyring remove: %w", err)
			}
		}
	}
	g.log.Info("gossip keyring loaded", "keys", len(keys))
	return nil
}

// Leave announces that this node leaves for good and waits up to timeout
// for the announcement to spread. The node stays bound until Shutdown.
func (g *Gossip) Leave(timeout time.Duration) error {
	if err := g.SetMeta(func(m *Meta) { m.Leaving = true }); err != nil {
		return err
	}
	// Gossip may deliver the meta update after the leave itself, and then
	// drops it (older incarnation); a direct message over TCP to each
	// member says it too, and either order ends in "left" (markLeaving).
	g.mu.Lock()
	id := g.meta.ID
	g.mu.Unlock()
	msg := append([]byte(leaveMsgPrefix), id...)
	// The addresses come from this package's own member records:
	// memberlist's Members hands out its live *Node values, which its
	// packet handler rewrites under its own lock (a data race seen in
	// Test_GracefulLeaveOfTheLeader).
	for _, m := range g.Members() {
		if m.ID == id || m.Status != StatusAlive {
			continue
		}
		n, err := memberlistNode(m)
		if err == nil {
			err = g.ml.SendReliable(n, msg)
		}
		if err != nil {
			g.log.Warn("gossip leave notice not sent", "to", m.ID, "err", err)
		}
	}
	if err := g.ml.Leave(timeout); err != nil {
		return fmt.Errorf("gossip leave: %w", err)
	}
	return nil
}

// memberlistNode is the memberlist address of m, for a direct message.
func memberlistNode(m Member) (*memberlist.Node, error) {
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return nil, fmt.Errorf("member %s address %q: %w", m.ID, m.Addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("member %s port %q: %w", m.ID, port, err)
	}
	return &memberlist.Node{Name: m.ID, Addr: net.ParseIP(host), Port: uint16(p)}, nil
}

// Shutdown stops gossiping without announcing a leave: the others see
// this node fail, which a restart is.
func (g *Gossip) Shutdown() error {
	if err := g.ml.Shutdown(); err != nil {
		return fmt.Errorf("gossip shutdown: %w", err)
	}
	return nil
}

func (g *Gossip) changed() {
	if g.onChange != nil {
		g.onChange()
	}
}

// record stores what memberlist said about node n.
func (g *Gossip) record(n *memberlist.Node, st Status) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID != n.Name {
		// A member whose announcement we cannot read is not a server we
		// can use; keep its name so it is visible, with no addresses.
		g.log.Warn("gossip member with unreadable meta", "name", n.Name, "err", err)
		meta = Meta{ID: n.Name}
	}
	g.mu.Lock()
	old, ok := g.members[n.Name]
	m := Member{Meta: meta, Addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))), Status: st, Since: old.Since}
	if !ok || old.Status != st {
		m.Since = g.now()
	}
	g.members[n.Name] = m
	g.mu.Unlock()
	if !ok || old.Status != st {
		g.log.Info("gossip member", "id", n.Name, "status", st.String(), "addr", m.Addr)
	}
	g.changed()
}

// leaveMsgPrefix starts the one user message: "this member leaves".
const leaveMsgPrefix = "docket-leave:"

// markLeaving records that id announced a leave; a member already seen
// failed is then one that left.
func (g *Gossip) markLeaving(id string) {
	g.mu.Lock()
	m, ok := g.members[id]
	changed := ok && (!m.Leaving || m.Status == StatusFailed)
	if ok {
		m.Leaving = true
		if m.Status == StatusFailed {
			m.Status, m.Since = StatusLeft, g.now()
		}
		g.members[id] = m
	}
	g.mu.Unlock()
	if changed {
		g.changed()
	}
}

// delegate carries this node's Meta and receives leave notices.
type delegate Gossip

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	b, err := json.Marshal(d.meta)
	d.mu.Unlock()
	if err != nil || len(b) > limit {
		// Meta is a handful of short strings; past the limit is a bug.
		panic(fmt.Sprintf("gossip meta of %d bytes (limit %d): %v", len(b), limit, err))
	}
	return b
}
func (d *delegate) NotifyMsg(b []byte) {
	if id, ok := strings.CutPrefix(string(b), leaveMsgPrefix); ok {
		(*Gossip)(d).markLeaving(id)
	}
}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// events turns memberlist's callbacks into member states.
type events Gossip

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Gossip)(e).record(n, StatusAlive) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Gossip)(e).record(n, StatusAlive) }
func (e *events) NotifyLeave(n *memberlist.Node) {
	st := StatusFailed
	g := (*Gossip)(e)
	g.mu.Lock()
	leaving := g.members[n.Name].Leaving
	g.mu.Unlock()
	if n.State == memberlist.StateLeft || leaving {
		st = StatusLeft
	}
	g.record(n, st)
}
