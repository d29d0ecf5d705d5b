package storage

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

var prefixQueueConfig = []byte("g/")

// QueueConfigKey is g/<queue>/<tenant>: one queue's configuration.
func QueueConfigKey(queue, tenant string) []byte {
	k := make([]byte, 0, len(prefixQueueConfig)+len(queue)+len(tenant)+1)
	k = append(k, prefixQueueConfig...)
	k = append(k, queue...)
	k = append(k, '/')
	return append(k, tenant...)
}

// ParseQueueConfigKey splits g/<queue>/<tenant>.
func ParseQueueConfigKey(key []byte) (queue, tenant string, err error) {
	rest, ok := bytes.CutPrefix(key, prefixQueueConfig)
	if !ok {
		return "", "", fmt.Errorf("queue config key %q: wrong prefix", key)
	}
	q, t, ok := bytes.Cut(rest, []byte{'/'})
	if !ok {
		return "", "", fmt.Errorf("queue config key %q: no tenant", key)
	}
	return string(q), string(t), nil
}

// UnmarshalQueueConfig decodes a g/ value.
func UnmarshalQueueConfig(v []byte) (*pb.QueueConfig, error) {
	c := &pb.QueueConfig{}
	if err := proto.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("queue config: decode: %w", err)
	}
	return c, nil
}

// QueueConfigPrefix bounds a scan over every queue's configuration.
func QueueConfigPrefix() []byte { return prefixQueueConfig }

// GetQueueConfig reads g/<queue>/<tenant>; a queue without a record has
// the default configuration (the zero message).
func GetQueueConfig(r Reader, queue, tenant string) (*pb.QueueConfig, error) {
	v, err := getCopy(r, QueueConfigKey(queue, tenant))
	if errors.Is(err, ErrNotFound) {
		return &pb.QueueConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue config %s/%s: %w", queue, tenant, err)
	}
	c := &pb.QueueConfig{}
	if err := proto.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("queue config %s/%s: decode: %w", queue, tenant, err)
	}
	return c, nil
}

// PutQueueConfig writes g/<queue>/<tenant>, or deletes it when c is the
// default configuration, so only queues with a setting have a record.
func PutQueueConfig(w Writer, queue, tenant string, c *pb.QueueConfig) error {
	k := QueueConfigKey(queue, tenant)
	if proto.Size(c) == 0 {
		return w.Delete(k, nil)
	}
	v, err := marshal.Marshal(c)
	if err != nil {
		return fmt.Errorf("queue config %s/%s: encode: %w", queue, tenant, err)
	}
	return w.Set(k, v, nil)
}
