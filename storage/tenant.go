package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var prefixTenant = []byte("u/")

// TenantKey is u/<tenant>: what one tenant stores, for its limits.
func TenantKey(tenant string) []byte {
	k := make([]byte, 0, len(prefixTenant)+len(tenant))
	return append(append(k, prefixTenant...), tenant...)
}

// TenantPrefix bounds a scan over every tenant's usage.
func TenantPrefix() []byte { return prefixTenant }

// TenantUsage is the record u/<tenant>: the tenant's stored task records
// (in every state, until purged) and their encoded bytes; from version 2
// also its running tasks across all its queues and its concurrency limit.
type TenantUsage struct {
	Tasks, Bytes uint64
	// Running counts the tenant's RUNNING tasks and MaxRunning is its
	// concurrency limit (0: none). Kept only in a version 2 record
	// (HasRunning), which fsm writes from its LevelLimits latch on; until
	// then the record is byte for byte what older builds write.
	Running, MaxRunning uint64
	HasRunning          bool
}

const (
	tenantVersion1 = 1
	tenantLenV1    = 1 + 8 + 8
	tenantVersion2 = 2
	tenantLenV2    = tenantLenV1 + 8 + 8
)

// Marshal encodes u in its fixed binary form: a version byte, then the
// counters big-endian (two in version 1, four in version 2).
func (u *TenantUsage) Marshal() []byte {
	if !u.HasRunning {
		b := make([]byte, 0, tenantLenV1)
		b = append(b, tenantVersion1)
		b = binary.BigEndian.AppendUint64(b, u.Tasks)
		return binary.BigEndian.AppendUint64(b, u.Bytes)
	}
	b := make([]byte, 0, tenantLenV2)
	b = append(b, tenantVersion2)
	for _, v := range []uint64{u.Tasks, u.Bytes, u.Running, u.MaxRunning} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// UnmarshalTenantUsage decodes a u/ value of either version.
func UnmarshalTenantUsage(b []byte) (TenantUsage, error) {
	switch {
	case len(b) >= tenantLenV1 && b[0] == tenantVersion1:
		return TenantUsage{Tasks: binary.BigEndian.Uint64(b[1:]), Bytes: binary.BigEndian.Uint64(b[9:])}, nil
	case len(b) >= tenantLenV2 && b[0] == tenantVersion2:
		return TenantUsage{Tasks: binary.BigEndian.Uint64(b[1:]), Bytes: binary.BigEndian.Uint64(b[9:]),
			Running: binary.BigEndian.Uint64(b[17:]), MaxRunning: binary.BigEndian.Uint64(b[25:]), HasRunning: true}, nil
	}
	return TenantUsage{}, fmt.Errorf("tenant usage: %d bytes, version %v", len(b), b[:min(1, len(b))])
}

// GetTenantUsage reads u/<tenant>; a tenant with nothing stored reads as
// zero.
func GetTenantUsage(r Reader, tenant string) (TenantUsage, error) {
	v, err := getCopy(r, TenantKey(tenant))
	if errors.Is(err, ErrNotFound) {
		return TenantUsage{}, nil
	}
	if err != nil {
		return TenantUsage{}, err
	}
	return UnmarshalTenantUsage(v)
}

// PutTenantUsage writes u/<tenant>.
func PutTenantUsage(w Writer, tenant string, u *TenantUsage) error {
	return w.Set(TenantKey(tenant), u.Marshal(), nil)
}

// Add changes the counters by (tasks, bytes), never below zero: tasks
// stored before this record existed (a keyspace from an older build) were
// never counted, and removing them must not wrap.
func (u *TenantUsage) Add(tasks, bytes int64) {
	u.Tasks = addClamped(u.Tasks, tasks)
	u.Bytes = addClamped(u.Bytes, bytes)
}

func addClamped(v uint64, d int64) uint64 {
	if d < 0 && uint64(-d) > v {
		return 0
	}
	return uint64(int64(v) + d)
}
