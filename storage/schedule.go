package storage

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// prefixSchedule holds recurring tasks: s/<tenant>/<name> -> pb.Schedule.
// Tenant first, so that one tenant's schedules are one range (listing,
// counting against a limit) and names never need escaping: neither holds
// a '/'.
var prefixSchedule = []byte("s/")

// ScheduleKey is s/<tenant>/<name>.
func ScheduleKey(tenant, name string) []byte {
	k := make([]byte, 0, len(prefixSchedule)+len(tenant)+len(name)+1)
	k = append(k, prefixSchedule...)
	k = append(k, tenant...)
	k = append(k, '/')
	return append(k, name...)
}

// SchedulePrefix bounds a scan over every tenant's schedules.
func SchedulePrefix() []byte { return prefixSchedule }

// ScheduleTenantPrefix bounds a scan over one tenant's schedules.
func ScheduleTenantPrefix(tenant string) []byte {
	return append(append(append([]byte{}, prefixSchedule...), tenant...), '/')
}

// GetSchedule reads one schedule; ErrNotFound when absent.
func GetSchedule(r Reader, tenant, name string) (*pb.Schedule, error) {
	v, err := getCopy(r, ScheduleKey(tenant, name))
	if errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("schedule %s/%s: %w", tenant, name, err)
	}
	return decodeSchedule(v)
}

func decodeSchedule(v []byte) (*pb.Schedule, error) {
	s := &pb.Schedule{}
	if err := proto.Unmarshal(v, s); err != nil {
		return nil, fmt.Errorf("schedule: decode: %w", err)
	}
	return s, nil
}

// PutSchedule writes s under its tenant and name.
func PutSchedule(w Writer, s *pb.Schedule) error {
	v, err := marshal.Marshal(s)
	if err != nil {
		return fmt.Errorf("schedule %s/%s: encode: %w", s.GetTenant(), s.GetName(), err)
	}
	return w.Set(ScheduleKey(s.GetTenant(), s.GetName()), v, nil)
}

// DeleteSchedule removes one schedule.
func DeleteSchedule(w Writer, tenant, name string) error {
	return w.Delete(ScheduleKey(tenant, name), nil)
}

// CountSchedules counts a tenant's schedules, stopping at limit.
func CountSchedules(r Reader, tenant string, limit int) (int, error) {
	p := ScheduleTenantPrefix(tenant)
	n := 0
	err := Scan(r, p, PrefixEnd(p), limit, func(_, _ []byte) error { n++; return nil })
	return n, err
}

// ListSchedules pages through one tenant's schedules by name, within
// maxBytes (at least one), and returns the cursor of the next page.
func ListSchedules(r Reader, tenant, cursor string, maxBytes int) (out []*pb.Schedule, next string, err error) {
	prefix := ScheduleTenantPrefix(tenant)
	lower := prefix
	if cursor != "" {
		key, err := decodeCursor(cursor, prefix, func(k []byte) error {
			if bytes.IndexByte(k[len(prefix):], '/') >= 0 {
				return errors.New("not a schedule key")
			}
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("schedules of %s: %w", tenant, err)
		}
		lower = append(key, 0)
	}
	page := pageBudget{maxBytes: maxBytes}
	err = Scan(r, lower, PrefixEnd(prefix), 0, func(k, v []byte) error {
		s, err := decodeSchedule(v)
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		if !page.take(s, k) {
			next = page.cursor()
			return ErrStop
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ScanSchedules calls fn with up to limit schedules of every tenant in key
// order, starting strictly after the key after (nil: from the first), and
// returns the last key seen (nil when the range ended before limit).
func ScanSchedules(r Reader, after []byte, limit int, fn func(*pb.Schedule) error) ([]byte, error) {
	lower := prefixSchedule
	if after != nil {
		lower = append(append([]byte{}, after...), 0)
	}
	var last []byte
	n := 0
	err := Scan(r, lower, PrefixEnd(prefixSchedule), limit, func(k, v []byte) error {
		s, err := decodeSchedule(v)
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		n++
		last = append(last[:0], k...)
		return fn(s)
	})
	if err != nil || n < limit {
		return nil, err
	}
	return last, nil
}
