package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cmd/docket/dashboard"
)

// browserFrom is a viewer of the dashboard at base whose connections come
// from the loopback address ip (Linux routes all of 127/8 to lo).
func (f *dashFixture) browserFrom(base, ip string) *browser {
	b := f.browserAt(base)
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	b.c = &http.Client{Jar: jar, Timeout: 15 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f.t.Cleanup(b.c.CloseIdleConnections)
	return b
}

// Test_DashboardLoginRateLimited: a brute force of many tokens from one
// address is checked against the cluster at a bounded rate (the rest are
// refused 429 with Retry-After before any API call), while a viewer at
// another address logs in at once, and the cluster keeps its leader and
// term.
func Test_DashboardLoginRateLimited(t *testing.T) {
	f := startDashboard(t, 3)
	leader := waitLeader(t, f.nodes)
	term := leader.node.Status().GetTerm()
	const attempts = 1000
	attacker := f.browserFrom(f.url, "127.0.0.2")
	// Paced over three seconds, so that the bucket refills while it runs.
	pace := time.NewTicker(3 * time.Second / attempts)
	defer pace.Stop()
	start := time.Now()
	checked, refused := 0, 0
	for i := range attempts {
		<-pace.C
		resp, _ := attacker.post("/login", url.Values{"token": {fmt.Sprintf("guess-%06d", i)}})
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
			refused++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("guess %d: %d, want 401 or 429", i, resp.StatusCode)
		}
	}
	elapsed := time.Since(start)
	bound := dashboard.LoginBurst + int(elapsed.Seconds()*dashboard.LoginRate) + 1
	t.Logf("%d guesses in %v from one address: %d checked (bound %d), %d refused 429", attempts, elapsed.Round(time.Millisecond), checked, bound, refused)
	if checked > bound {
		t.Fatalf("%d guesses checked in %v, want at most %d (burst %d, %v/s)", checked, elapsed, bound, dashboard.LoginBurst, dashboard.LoginRate)
	}

	// Another address is not held up by the first one's bucket.
	f.browserFrom(f.url, "127.0.0.3").login(dashBoot)

	// And the brute force shows in the metrics, outcome by outcome.
	for outcome, want := range map[string]int{"refused": checked, "rate_limited": refused, "accepted": 1} {
		if got := loginCount(t, f.reg, outcome); got != want {
			t.Errorf("docket_dashboard_logins_total{outcome=%q} = %d, want %d", outcome, got, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if now := waitLeader(t, f.nodes); now != leader || now.node.Status().GetTerm() != term {
		t.Fatalf("leader %s term %d after the brute force, was %s term %d", now.id, now.node.Status().GetTerm(), leader.id, term)
	}
	if _, err := f.admin.EnqueueOne(ctx, "after", []byte("x")); err != nil {
		t.Fatalf("enqueue after the brute force: %v", err)
	}
}

// loginCount is the dashboard's count of logins of one outcome, as reg
// gathers it; 0 when none was counted.
func loginCount(t *testing.T, reg *prometheus.Registry, outcome string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "docket_dashboard_logins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}
