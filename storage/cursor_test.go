package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// catalogFixture is fixture with a catalog record for each of its tenants.
func catalogFixture(t *testing.T) *pebble.DB {
	db := fixture(t)
	mustCommit(t, db, func(b *pebble.Batch) error {
		for _, tn := range []string{"acme", "beta"} {
			if err := PutQueueMeta(b, "q", tn, &QueueMeta{Dead: 7}); err != nil {
				return err
			}
		}
		return nil
	})
	return db
}

// Test_CursorsAreOpaque: a listing's next cursor names no key of the
// keyspace: no index prefix, no queue or tenant name.
func Test_CursorsAreOpaque(t *testing.T) {
	db := catalogFixture(t)
	for _, state := range []pb.TaskState{pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED,
		pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_DEAD} {
		_, next, err := ListTasks(Wrap(db), "q", "acme", state, "", 1, 0)
		if err != nil || next == "" {
			t.Fatalf("%v: first page: next %q, %v", state, next, err)
		}
		if strings.Contains(next, "acme") || strings.HasPrefix(next, "q/") || strings.ContainsAny(next, "/\x00") {
			t.Errorf("%v: cursor %q shows a key", state, next)
		}
	}
	_, next, err := StatsPage(Wrap(db), "", "", "", 1)
	if err != nil || next == "" {
		t.Fatalf("stats first page: next %q, %v", next, err)
	}
	if strings.Contains(next, "acme") || strings.ContainsAny(next, "/\x00") {
		t.Errorf("stats cursor %q shows a key", next)
	}
}

// Test_BadCursorsRefused: anything but a cursor this listing handed out is
// ErrBadCursor, the raw keys that older builds handed out included, and no
// refused cursor lists anything.
func Test_BadCursorsRefused(t *testing.T) {
	db := catalogFixture(t)
	_, acme, err := ListTasks(Wrap(db), "q", "acme", pb.TaskState_TASK_STATE_DEAD, "", 1, 0)
	if err != nil || acme == "" {
		t.Fatalf("first page: cursor %q, %v", acme, err)
	}
	_, running, err := ListTasks(Wrap(db), "q", "beta", pb.TaskState_TASK_STATE_RUNNING, "", 1, 0)
	if err != nil || running == "" {
		t.Fatalf("first page: cursor %q, %v", running, err)
	}
	bad := map[string]string{
		"garbage":             "!!not base64!!",
		"other tenant":        acme,
		"other state":         running,
		"raw key":             string(DeadPrefix("q", "beta")) + "beta-x0",
		"bare prefix":         string(DeadPrefix("q", "beta")),
		"empty token":         "AA",
		"unknown version":     "Ang",
		"padding":             acme + "==",
		"longer than allowed": strings.Repeat("A", 4096),
	}
	for name, cursor := range bad {
		tasks, next, err := ListTasks(Wrap(db), "q", "beta", pb.TaskState_TASK_STATE_DEAD, cursor, 100, 0)
		if !errors.Is(err, ErrBadCursor) || len(tasks) != 0 || next != "" {
			t.Errorf("%s %q: %d tasks, next %q, err %v; want ErrBadCursor", name, cursor, len(tasks), next, err)
		}
	}
	_, stats, err := StatsPage(Wrap(db), "q", "", "", 1)
	if err != nil || stats == "" {
		t.Fatalf("stats first page: cursor %q, %v", stats, err)
	}
	for name, cursor := range map[string]string{"garbage": "!!", "list cursor": acme, "raw key": string(CatalogPrefix("q")) + "acme"} {
		if _, _, err := StatsPage(Wrap(db), "q", "", cursor, 0); !errors.Is(err, ErrBadCursor) {
			t.Errorf("stats %s %q: err %v, want ErrBadCursor", name, cursor, err)
		}
	}
	if _, _, err := StatsPage(Wrap(db), "other", "", stats, 0); !errors.Is(err, ErrBadCursor) {
		t.Errorf("stats cursor of queue q accepted for queue other: %v", err)
	}
}

// FuzzCursor: decoding never panics and accepts only keys inside the
// listed range that parse as its keys; every cursor a listing can hand out
// decodes back to its key.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"", "AA", "AQ", "Ang", "!!", "AXEvcS9hY21lL3gvaWQ", encodeCursor(DeadKey("q", "acme", "id")),
		encodeCursor(PendingKey("q", "acme", 9, 42, "id")), encodeCursor(CatalogKey("q", "acme"))} {
		f.Add(s, []byte("id"), uint8(0))
	}
	prefixes := []struct {
		prefix []byte
		state  pb.TaskState
	}{
		{PendingPrefix("q", "acme"), pb.TaskState_TASK_STATE_PENDING},
		{DelayedPrefix("q", "acme"), pb.TaskState_TASK_STATE_DELAYED},
		{RunningPrefix("q", "acme"), pb.TaskState_TASK_STATE_RUNNING},
		{DeadPrefix("q", "acme"), pb.TaskState_TASK_STATE_DEAD},
	}
	f.Fuzz(func(t *testing.T, cursor string, suffix []byte, which uint8) {
		p := prefixes[int(which)%len(prefixes)]
		parse := func(k []byte) error { _, err := idFromIndexKey(k, len(p.prefix), p.state); return err }
		if key, err := decodeCursor(cursor, p.prefix, parse); err == nil {
			if !bytes.HasPrefix(key, p.prefix) || len(key) == len(p.prefix) || parse(key) != nil {
				t.Fatalf("decodeCursor(%q) = %q, outside %q", cursor, key, p.prefix)
			}
		} else if !errors.Is(err, ErrBadCursor) {
			t.Fatalf("decodeCursor(%q): %v, want ErrBadCursor", cursor, err)
		}
		_, _ = decodeCursor(cursor, CatalogPrefix(""), func(k []byte) error { _, _, err := ParseCatalogKey(k); return err })

		// Round trip: any key of the range that parses comes back.
		key := append(append([]byte{}, p.prefix...), suffix...)
		if len(suffix) == 0 || parse(key) != nil {
			return
		}
		enc := encodeCursor(key)
		if len(enc) > maxCursorLen {
			return // longer than any key a listing holds
		}
		got, err := decodeCursor(enc, p.prefix, parse)
		if err != nil || !bytes.Equal(got, key) {
			t.Fatalf("round trip of %q: %q, %v", key, got, err)
		}
	})
}
