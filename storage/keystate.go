package storage

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// prefixKeyState holds one record per active key of a keyed queue (fair
// queues): f/<queue>/<tenant>/<key>. The key is last, so its bytes may be
// anything; queue and tenant names hold no slash.
var prefixKeyState = []byte("f/")

// KeyStatePrefix is f/<queue>/<tenant>/: a scan over one queue's keys.
func KeyStatePrefix(queue, tenant string) []byte {
	k := make([]byte, 0, len(prefixKeyState)+len(queue)+len(tenant)+2)
	k = append(k, prefixKeyState...)
	k = append(k, queue...)
	k = append(k, '/')
	k = append(k, tenant...)
	return append(k, '/')
}

// KeyStateKey is f/<queue>/<tenant>/<key>.
func KeyStateKey(queue, tenant string, key []byte) []byte {
	return append(KeyStatePrefix(queue, tenant), key...)
}

// GetKeyState reads one key's record; ok is false when it has none.
func GetKeyState(r Reader, queue, tenant string, key []byte) (*pb.KeyState, bool, error) {
	v, err := getCopy(r, KeyStateKey(queue, tenant, key))
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("key state %s/%s/%q: %w", queue, tenant, key, err)
	}
	s := &pb.KeyState{}
	if err := proto.Unmarshal(v, s); err != nil {
		return nil, false, fmt.Errorf("key state %s/%s/%q: decode: %w", queue, tenant, key, err)
	}
	return s, true, nil
}

// PutKeyState writes one key's record, or deletes it when s is empty.
func PutKeyState(w Writer, queue, tenant string, key []byte, s *pb.KeyState) error {
	k := KeyStateKey(queue, tenant, key)
	if proto.Size(s) == 0 {
		return w.Delete(k, nil)
	}
	v, err := marshal.Marshal(s)
	if err != nil {
		return fmt.Errorf("key state %s/%s/%q: encode: %w", queue, tenant, key, err)
	}
	return w.Set(k, v, nil)
}

// ScanKeyStates calls fn with every key record of one queue, in key order.
func ScanKeyStates(r Reader, queue, tenant string, fn func(key []byte, s *pb.KeyState) error) error {
	prefix := KeyStatePrefix(queue, tenant)
	return Scan(r, prefix, PrefixEnd(prefix), 0, func(k, v []byte) error {
		s := &pb.KeyState{}
		if err := proto.Unmarshal(v, s); err != nil {
			return fmt.Errorf("key state %q: decode: %w", k, err)
		}
		return fn(bytes.Clone(k[len(prefix):]), s)
	})
}
