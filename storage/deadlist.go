package storage

import (
	"bytes"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// ListTenantDead pages through the dead letters of every queue of one
// tenant: queue by queue in catalog order (each queue's dead letters in
// id order), from after cursor. The keyspace puts the tenant after the
// queue (q/<queue>/<tenant>/x/<id>), so there is no one range to scan:
// the catalog (c/) names the tenant's queues, and its dead counter skips
// the queues that have none. A page costs a scan of the catalog up to the
// queues it lists, bounded by the number of queues.
//
// The cursor is the one a queue's listing hands out (the last dead
// index key listed), accepted only when that key is of this tenant, so a
// cursor cannot move the scan into another tenant's keys.
func ListTenantDead(r Reader, tenant, cursor string, limit, maxBytes int) ([]*pb.Task, string, error) {
	if limit <= 0 {
		limit = pb.DefaultListLimit
	}
	var after []byte // the dead index key the page continues after
	startQueue := ""
	if cursor != "" {
		key, err := decodeCursor(cursor, prefixQueue, func(k []byte) error {
			q, tn, ok := parseDeadKey(k)
			if !ok || tn != tenant {
				return fmt.Errorf("not a dead letter of tenant %s", tenant)
			}
			startQueue = q
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("list dead of tenant %s: %w", tenant, err)
		}
		after = key
	}
	var queues []string
	err := Scan(r, prefixCatalog, PrefixEnd(prefixCatalog), 0, func(k, v []byte) error {
		q, tn, err := ParseCatalogKey(k)
		if err != nil || tn != tenant {
			return err
		}
		if startQueue != "" && bytes.Compare(append([]byte(q), '/'), append([]byte(startQueue), '/')) < 0 {
			return nil // listed by earlier pages
		}
		m, err := UnmarshalQueueMeta(v)
		if err != nil {
			return fmt.Errorf("catalog %s/%s: %w", q, tn, err)
		}
		if m.Dead > 0 {
			queues = append(queues, q)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list dead of tenant %s: %w", tenant, err)
	}
	var tasks []*pb.Task
	budget := pageBudget{maxBytes: maxBytes}
	for _, q := range queues {
		c := ""
		if q == startQueue && after != nil {
			c = encodeCursor(after)
		}
		page, next, err := ListTasks(r, q, tenant, pb.TaskState_TASK_STATE_DEAD, c, limit-len(tasks), 0)
		if err != nil {
			return nil, "", err
		}
		for _, t := range page {
			if !budget.take(t, nil) { // the cursor names the task, not a key
				return tasks, tenantDeadCursor(tasks, tenant), nil
			}
			tasks = append(tasks, t)
		}
		if next != "" {
			return tasks, next, nil // this queue has more
		}
		if len(tasks) >= limit {
			return tasks, tenantDeadCursor(tasks, tenant), nil
		}
	}
	return tasks, "", nil
}

// tenantDeadCursor continues after the last task listed.
func tenantDeadCursor(tasks []*pb.Task, tenant string) string {
	last := tasks[len(tasks)-1]
	return encodeCursor(DeadKey(last.GetQueue(), tenant, last.GetId()))
}

// parseDeadKey splits q/<queue>/<tenant>/x/<id>.
func parseDeadKey(k []byte) (queue, tenant string, ok bool) {
	rest, ok := bytes.CutPrefix(k, prefixQueue)
	if !ok {
		return "", "", false
	}
	parts := bytes.SplitN(rest, []byte("/"), 4)
	if len(parts) != 4 || len(parts[0]) == 0 || len(parts[1]) == 0 || string(parts[2]) != "x" || len(parts[3]) == 0 {
		return "", "", false
	}
	return string(parts[0]), string(parts[1]), true
}
