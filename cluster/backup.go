package cluster

import (
	"hash/crc32"

	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// A backup file is
//
//	backupMagic
//	uint32 big-endian length, then BackupHeader as JSON
//	the FSM's snapshot stream (fsm/snapshot.go: versioned, checksummed)
//	trailer: uint64 body length, uint32 CRC-32C of the body
//
// The trailer lets a restore check the whole file before it hands any of
// it to Raft: hashicorp/raft stores a user snapshot before the FSM reads
// it, so a damaged file would otherwise sit in the snapshot store as the
// newest snapshot, and every restart would try it again.
const (
	backupMagic      = "DOCKET-BACKUP-1\n"
	backupTrailerLen = 8 + 4
	maxBackupHeader  = 1 << 16
)

// ErrBadBackup means a backup file is not one, or is damaged or cut short.
var ErrBadBackup = errors.New("not a valid docket backup")

// BackupHeader describes a backup.
type BackupHeader struct {
	// Index is the last Raft index the backup's keyspace applied; Term is
	// that entry's term, or 0 when the log no longer had it.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Level is the feature level the cluster had latched: a restore needs
	// every server to apply it.
	Level   uint32    `json:"feature_level"`
	Node    string    `json:"node"`
	Created time.Time `json:"created"`
}

// SaveBackup writes a backup of the keyspace to w: on the leader, after a
// read barrier, so it holds every write acknowledged before the call.
// Applies go on while it streams; the backup is the state at one index.
func (n *Node) SaveBackup(ctx context.Context, w io.Writer) (BackupHeader, error) {
	if !n.IsLeader() {
		return BackupHeader{}, n.notLeader()
	}
	if err := n.ReadBarrier(ctx); err != nil {
		return BackupHeader{}, fmt.Errorf("backup: %w", err)
	}
	h, err := WriteBackup(ctx, w, n.fsm, n.cfg.ID, func(index uint64) uint64 {
		var l raft.Log
		if err := n.logs.GetLog(index, &l); err != nil {
			return 0 // compacted away: the header says so with 0
		}
		return l.Term
	})
	if err != nil {
		return h, err
	}
	n.log.Info("backup saved", "index", h.Index)
	return h, nil
}

// castagnoli is the CRC table of the backup file's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteBackup writes f's keyspace as a backup file to w.
func WriteBackup(ctx context.Context, w io.Writer, f *fsm.FSM, node string, termOf func(uint64) uint64) (BackupHeader, error) {
	snap, index, err := f.Backup()
	if err != nil {
		return BackupHeader{}, err
	}
	defer snap.Release()
	h := BackupHeader{Index: index, Term: termOf(index), Level: f.EnabledLevel(), Node: node, Created: time.Now().UTC()}
	hb, err := json.Marshal(h)
	if err != nil {
		return h, fmt.Errorf("backup header: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.WriteString(backupMagic); err != nil {
		return h, err
	}
	if err := binary.Write(bw, binary.BigEndian, uint32(len(hb))); err != nil {
		return h, err
	}
	if _, err := bw.Write(hb); err != nil {
		return h, err
	}
	sink := &backupSink{ctx: ctx, w: bw, sum: crc32.New(castagnoli)}
	if err := snap.Persist(sink); err != nil {
		return h, fmt.Errorf("backup at %d: %w", index, err)
	}
	var trailer [backupTrailerLen]byte
	binary.BigEndian.PutUint64(trailer[:8], uint64(sink.n))
	binary.BigEndian.PutUint32(trailer[8:], sink.sum.Sum32())
	if _, err := bw.Write(trailer[:]); err != nil {
		return h, err
	}
	if err := bw.Flush(); err != nil {
		return h, fmt.Errorf("backup: %w", err)
	}
	return h, nil
}

// backupSink is the raft.SnapshotSink the FSM streams a backup into.
type backupSink struct {
	ctx context.Context
	w   io.Writer
	sum hash.Hash32
	n   int64
}

func (s *backupSink) Write(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.w.Write(p)
	s.sum.Write(p[:n])
	s.n += int64(n)
	return n, err
}
func (s *backupSink) Close() error  { return nil }
func (s *backupSink) ID() string    { return "backup" }
func (s *backupSink) Cancel() error { return nil }

// ReadBackupHeader checks a whole backup file and returns its header and
// the offset and length of the FSM stream in it.
func ReadBackupHeader(f *os.File) (h BackupHeader, off, size int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return h, 0, 0, err
	}
	magic := make([]byte, len(backupMagic)+4)
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic[:len(backupMagic)]) != backupMagic {
		return h, 0, 0, fmt.Errorf("%w: no backup header (%v)", ErrBadBackup, err)
	}
	hl := int64(binary.BigEndian.Uint32(magic[len(backupMagic):]))
	off = int64(len(magic)) + hl
	if hl > maxBackupHeader || off+backupTrailerLen > st.Size() {
		return h, 0, 0, fmt.Errorf("%w: header of %d bytes in a file of %d", ErrBadBackup, hl, st.Size())
	}
	hb := make([]byte, hl)
	if _, err := f.ReadAt(hb, int64(len(magic))); err != nil {
		return h, 0, 0, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return h, 0, 0, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	var trailer [backupTrailerLen]byte
	if _, err := f.ReadAt(trailer[:], st.Size()-backupTrailerLen); err != nil {
		return h, 0, 0, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	size = st.Size() - backupTrailerLen - off
	if got := int64(binary.BigEndian.Uint64(trailer[:8])); got != size {
		return h, 0, 0, fmt.Errorf("%w: trailer says %d bytes of keyspace, the file holds %d (cut short?)", ErrBadBackup, got, size)
	}
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, io.NewSectionReader(f, off, size)); err != nil {
		return h, 0, 0, fmt.Errorf("backup: read: %w", err)
	}
	if want := binary.BigEndian.Uint32(trailer[8:]); sum.Sum32() != want {
		return h, 0, 0, fmt.Errorf("%w: CRC-32C %08x, the trailer says %08x", ErrBadBackup, sum.Sum32(), want)
	}
	return h, off, size, nil
}

// RestoreBackup replaces the cluster's keyspace with the backup in f, on
// the leader: Raft installs it as a snapshot at an index above every
// entry so far, and sends it to each follower. Task ids and fences of the
// backup stay below the new entries', so none is handed out twice. It
// returns the backup's header and the index the cluster went on from.
func (n *Node) RestoreBackup(ctx context.Context, f *os.File) (BackupHeader, uint64, error) {
	h, off, size, err := ReadBackupHeader(f)
	if err != nil {
		return h, 0, err
	}
	if !n.IsLeader() {
		return h, 0, n.notLeader()
	}
	cfg := n.raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return h, 0, fmt.Errorf("restore: configuration: %w", err)
	}
	target, behind := levelTarget(cfg.Configuration(), n.cfg.ID, n.fsm.MaxLevel(), func(id string) uint32 {
		p, _ := n.peers.Get(id)
		return p.Level
	})
	if ok := max(target, n.EnabledLevel()); h.Level > ok {
		return h, 0, fmt.Errorf("restore: the backup holds feature level %d, the cluster can apply %d (servers at or below it: %v): %w",
			h.Level, ok, behind, service.ErrFeatureDisabled)
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: h.Index, Term: max(h.Term, 1), Size: size}
	if err := n.raft.Restore(meta, io.NewSectionReader(f, off, size), timeout); err != nil {
		return h, 0, fmt.Errorf("restore: %w", n.mapRaftErr(err))
	}
	// Raft's no-op after the restore is not a command, so the FSM has not
	// seen an entry of the new index range yet: one small command moves
	// its applied index there (apply-lag health compares the two), and
	// the latch is taken again, since the backup may hold an older one.
	if _, err := n.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: fsm.LevelBase}}}); err != nil {
		return h, 0, fmt.Errorf("restore applied; first entry after it: %w", err)
	}
	if err := n.latchOnce(ctx); err != nil {
		n.log.Warn("feature level latch after restore failed", "err", err)
	}
	n.log.Warn("keyspace restored from a backup", "backup_index", h.Index, "backup_node", h.Node,
		"backup_created", h.Created, "applied", n.fsm.AppliedIndex())
	return h, n.fsm.AppliedIndex(), nil
}

// RestoreBackupFrom spools a backup from r into the data dir, then
// restores it (RestoreBackup). The spool file is removed afterwards.
func (n *Node) RestoreBackupFrom(ctx context.Context, r io.Reader) (BackupHeader, uint64, error) {
	if !n.IsLeader() {
		return BackupHeader{}, 0, n.notLeader()
	}
	f, err := os.CreateTemp(n.cfg.DataDir, "restore-*.spool")
	if err != nil {
		return BackupHeader{}, 0, fmt.Errorf("restore: spool: %w", err)
	}
	defer func() {
		_ = f.Close() // fully written and read by now; a close error changes nothing
		if err := os.Remove(f.Name()); err != nil {
			n.log.Warn("restore spool file left behind", "file", f.Name(), "err", err)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("restore: receive: %w", err)
	}
	return n.RestoreBackup(ctx, f)
}
