package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

var (
	opSnapshotSave    = op{name: "SnapshotSave"}
	opSnapshotRestore = op{name: "SnapshotRestore"}
)

// snapshotWait is how long one snapshot attempt may stream when ctx has no
// deadline: a backup is as large as the keyspace, far beyond the attempt
// timeout of ordinary calls.
const snapshotWait = time.Hour

func snapshotBudget(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return snapshotWait
}

// SnapshotSave writes a backup of the cluster's keyspace to w, taken on
// the leader after every write acknowledged before the call. It returns
// the bytes written. A stream that breaks after the first byte is not
// retried (w holds part of a backup); run it again into a fresh file.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer) (int64, error) {
	var written int64
	_, err := c.invokeWait(ctx, opSnapshotSave, snapshotBudget, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		stream, err := docketv1.NewClusterClient(cc).SnapshotSave(ctx, &docketv1.SnapshotSaveRequest{}, opts...)
		if err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return partial(err, written, "received")
			}
			n, err := w.Write(m.GetData())
			written += int64(n)
			if err != nil {
				return fmt.Errorf("write backup: %w", err)
			}
		}
	})
	return written, err
}

// SnapshotRestore replaces the cluster's keyspace with the backup in r
// (a file SnapshotSave wrote). Every write since the backup is lost. A
// follower's NOT_LEADER is followed (r is rewound); any other failure
// after the first byte is not retried: the restore may have happened.
func (c *Client) SnapshotRestore(ctx context.Context, r io.ReadSeeker) (*docketv1.SnapshotRestoreResponse, error) {
	var resp *docketv1.SnapshotRestoreResponse
	_, err := c.invokeWait(ctx, opSnapshotRestore, snapshotBudget, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewind backup: %w", err)
		}
		stream, err := docketv1.NewClusterClient(cc).SnapshotRestore(ctx, opts...)
		if err != nil {
			return err
		}
		var sent int64
		buf := make([]byte, 1<<20)
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if err := stream.Send(&docketv1.SnapshotChunk{Data: buf[:n]}); err != nil {
					// The server ended the stream; its status comes
					// with CloseAndRecv.
					break
				}
				sent += int64(n)
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				return fmt.Errorf("read backup: %w", rerr)
			}
		}
		out, err := stream.CloseAndRecv()
		if err != nil {
			if errorReason(status.Convert(err)) == docketv1.ReasonNotLeader {
				return err // refused before reading a byte: retry on the leader
			}
			return partial(err, sent, "sent")
		}
		resp = out
		return nil
	})
	return resp, err
}

// partial keeps a stream's error out of the retry loop once bytes moved,
// unless none did.
func partial(err error, n int64, what string) error {
	if n == 0 {
		return err
	}
	return fmt.Errorf("snapshot stream failed after %d bytes %s, not retried: %v", n, what, mapError(err))
}
