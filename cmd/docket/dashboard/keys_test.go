package dashboard

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_QueuePageRendersTopKeys renders the Queue page of a fair queue from
// a ListKeys answer: both tables, a key's limit and its weight (0 shown as
// 1), and a task row's key; a page without keys shows no key table.
func Test_QueuePageRendersTopKeys(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	data := func(keys *pb.ListKeysResponse) map[string]any {
		return map[string]any{
			"Queue": "exports", "Tenant": "default", "Stats": &pb.QueueStats{Queue: "exports", Tenant: "default"},
			"State": "pending", "Keys": keys, "Rates": rateSeries{}, "Orphans": map[string]bool{},
			"Tasks": []*pb.Task{{Id: "t1", Tenant: "default", Key: []byte("acme")}, {Id: "t2", Tenant: "default"}},
		}
	}
	var b bytes.Buffer
	keys := &pb.ListKeysResponse{Keyed: true, Keys: 2,
		ByBacklog: []*pb.KeyStats{{Key: []byte("acme"), Pending: 19990, Running: 2, MaxRunning: 2}, {Key: []byte("globex"), Pending: 3, Weight: 4}},
		ByRunning: []*pb.KeyStats{{Key: []byte("acme"), Pending: 19990, Running: 2, MaxRunning: 2}}}
	if err := pages["queue"].Execute(&b, data(keys)); err != nil {
		t.Fatal(err)
	}
	body := b.String()
	backlog := regexp.MustCompile(`(?s)<table id="keys-backlog".*?</table>`).FindString(body)
	for _, want := range []string{
		`<td>acme</td><td class="n">19990</td><td class="n">2</td><td class="n">2</td><td class="n">1</td>`,
		`<td>globex</td><td class="n">3</td><td class="n">0</td><td class="n">-</td><td class="n">4</td>`,
	} {
		if !strings.Contains(backlog, want) {
			t.Errorf("the backlog table lacks %s:\n%s", want, backlog)
		}
	}
	if !strings.Contains(body, `id="keys-running"`) || !strings.Contains(body, `2 keys with work`) ||
		strings.Count(body, `<span class="tag key" title="key">`) != 1 {
		t.Errorf("queue page:\n%s", body)
	}
	b.Reset()
	if err := pages["queue"].Execute(&b, data(nil)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="keys-backlog"`) {
		t.Error("a queue without keys shows a key table")
	}
}
