package transport

import (
	"errors"
	"io"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// backupChunk is the size of one SnapshotChunk: well under the message
// limits, large enough that framing costs nothing.
const backupChunk = 1 << 20

// SnapshotSave streams a backup from the leader. A follower answers
// NOT_LEADER with the leader's address; a stream is never forwarded, so
// the bytes cross the network once.
func (c *clusterService) SnapshotSave(_ *pb.SnapshotSaveRequest, stream pb.Cluster_SnapshotSaveServer) error {
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&pb.SnapshotChunk{Data: b}) }}
	if _, err := c.s.node.SaveBackup(stream.Context(), w); err != nil {
		return toStatus(err)
	}
	return nil
}

// SnapshotRestore receives a backup file and restores it on the leader.
func (c *clusterService) SnapshotRestore(stream pb.Cluster_SnapshotRestoreServer) error {
	if !c.s.svc.IsLeader() {
		return toStatus(&notLeaderError{LeaderGRPC: c.s.svc.LeaderGRPCAddr()})
	}
	h, applied, err := c.s.node.RestoreBackupFrom(stream.Context(), &chunkReader{recv: stream.Recv})
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(&pb.SnapshotRestoreResponse{BackupIndex: h.Index, AppliedIndex: applied,
		BackupNode: h.Node, BackupCreated: h.Created.UnixNano()})
}

// chunkWriter cuts a byte stream into messages of at most backupChunk.
type chunkWriter struct{ send func([]byte) error }

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		b := p[:min(len(p), backupChunk)]
		if err := w.send(b); err != nil {
			return n, err
		}
		n, p = n+len(b), p[len(b):]
	}
	return n, nil
}

// chunkReader turns received messages back into a byte stream.
type chunkReader struct {
	recv func() (*pb.SnapshotChunk, error)
	buf  []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		m, err := r.recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		r.buf = m.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
