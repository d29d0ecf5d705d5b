package fsm

import (
	"errors"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// MaxClusterIDLen bounds a cluster id: it travels in every Raft
// connection's TLS handshake (an ALPN name, at most 255 bytes) and every
// gossip and forwarded message.
const MaxClusterIDLen = 64

// checkClusterID allows [A-Za-z0-9._-]{1,64}: the id is printed in logs
// and carried in protocol names, so it stays plain.
func checkClusterID(id string) error {
	if err := checkLen("id", id, 1, MaxClusterIDLen); err != nil {
		return err
	}
	return checkName("id", id)
}

// setClusterID stores the cluster's id the first time; a later id is
// ignored, so no entry can rename a cluster its peers already know.
func (tx *txn) setClusterID(c *pb.SetClusterIDCmd) error {
	have, err := storage.GetString(tx.r, storage.KeyClusterID)
	if err == nil && have != "" {
		return nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("read cluster id: %w", err)
	}
	if tx.clusterID != "" { // set earlier in this batch
		return nil
	}
	if err := tx.b.Set(storage.KeyClusterID, []byte(c.GetId()), nil); err != nil {
		return fmt.Errorf("set cluster id: %w", err)
	}
	tx.clusterID = c.GetId()
	return nil
}

func readClusterID(r storage.Reader) (*string, error) {
	id, err := storage.GetString(r, storage.KeyClusterID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster id: %w", err)
	}
	return &id, nil
}

// ClusterID is the cluster's id as of the last applied entry, "" before
// the cluster named itself (a new node that has not caught up, or a
// cluster below feature level 14).
func (f *FSM) ClusterID() string {
	if p := f.cluster.Load(); p != nil {
		return *p
	}
	return ""
}
