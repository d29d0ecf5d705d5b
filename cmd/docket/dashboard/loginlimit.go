package dashboard

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The login's own rate limit. Each POST /login costs an API call that
// hashes the token on the node, and a guess that fails costs the guesser
// nothing: a brute force from one address is held to LoginRate guesses a
// second after a burst of LoginBurst, per remote address, by a token
// bucket. A refused guess costs no API call: 429 with Retry-After. A
// login that succeeds gives its token back, so viewers who log in often
// (a shared office address, a script) are never held up.
const (
	// LoginRate is how many logins a second one remote address may try
	// once its burst is spent.
	LoginRate = 1.0
	// LoginBurst is how many logins one remote address may try at once:
	// enough for a viewer who mistypes a few times.
	LoginBurst = 5
	// loginAddrsMax bounds the addresses the limiter remembers. Past it
	// the buckets that refilled are dropped, which forgets nothing: a
	// full bucket is what a new address starts with.
	loginAddrsMax = 10_000
)

// loginLimiter is one token bucket per remote address (its IP: the port
// changes with every connection).
type loginLimiter struct {
	rate  float64 // tokens a second
	burst float64

	mu      sync.Mutex
	buckets map[string]*loginBucket
}

type loginBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newLoginLimiter(rate float64, burst int) *loginLimiter {
	return &loginLimiter{rate: rate, burst: float64(burst), buckets: map[string]*loginBucket{}}
}

// allow takes a token of addr's bucket at now. When there is none it
// answers how long until the next one.
func (l *loginLimiter) allow(addr string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= loginAddrsMax {
			l.dropFull(now)
		}
		b = &loginBucket{tokens: l.burst, at: now}
		l.buckets[addr] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// refund gives back the token a successful login took.
func (l *loginLimiter) refund(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets[addr]; ok {
		b.tokens = min(l.burst, b.tokens+1)
	}
}

// dropFull forgets the addresses whose bucket refilled. If every one is
// still draining (a flood from more addresses than the bound), it forgets
// them all: memory stays bounded, and each of those addresses gets one
// more burst.
func (l *loginLimiter) dropFull(now time.Time) {
	for a, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, a)
		}
	}
	if len(l.buckets) >= loginAddrsMax {
		clear(l.buckets)
	}
}

// remoteIP is the address a request came from, without its port. The
// dashboard trusts no forwarding header: one would let a guesser name a
// new address with every guess.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limitLogin answers 429 with Retry-After when r's remote address has no
// login left, and reports whether it did.
func (s *Server) limitLogin(w http.ResponseWriter, r *http.Request) bool {
	ok, wait := s.logins.allow(remoteIP(r), time.Now())
	if ok {
		return false
	}
	s.loginsBy.WithLabelValues("rate_limited").Inc()
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	http.Error(w, "too many logins from your address: wait a moment and try again", http.StatusTooManyRequests)
	return true
}
