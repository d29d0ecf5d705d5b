package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

//go:embed templates/*.html static/*
var assets embed.FS

// CookieName is the cookie that holds the viewer's token secret.
const CookieName = "docket_token"

// callTimeout bounds each API call a page makes, so a node that hangs
// cannot hold a viewer's request (and its goroutine) open.
const callTimeout = 5 * time.Second

// maxPeers bounds the cached connections to other servers (the Cluster
// page asks each for its own status); past it the cache is emptied.
const maxPeers = 16

// maxFormBytes bounds a POST body: a form of at most 50 ids.
const maxFormBytes = 64 << 10

// Config says which node the dashboard is a client of and how.
type Config struct {
	// GRPCAddr is the local node's API address; every call goes there and
	// the node forwards to the leader as for any client.
	GRPCAddr string
	// Creds dial the node's API and its peers' (TLS when the cluster runs
	// it); nil: plaintext.
	Creds credentials.TransportCredentials
	// Auth is the node's --auth: a login page asks for a token, kept in a
	// cookie and sent as the bearer token of every call.
	Auth bool
	// HTTPS says the dashboard is served over TLS: the cookie is Secure.
	HTTPS bool
	// Logger gets the failures of calls; nil: discarded.
	Logger *slog.Logger
	// Registerer, when set, gets the dashboard's metrics: its logins by
	// outcome (docket_dashboard_logins_total).
	Registerer prometheus.Registerer
}

// Server serves the dashboard's pages. Close releases its connections.
type Server struct {
	cfg   Config
	log   *slog.Logger
	conn  *grpc.ClientConn
	pages map[string]*template.Template
	// csrfKey signs the form tokens; random per process, so a restart
	// makes open forms fail once (the page is then reloaded).
	csrfKey []byte
	mux     *http.ServeMux

	mu    sync.Mutex
	peers map[string]*grpc.ClientConn

	roles  *roleCache
	rates  *rateBook
	logins *loginLimiter
	// loginsBy counts logins by outcome: accepted, refused (the node
	// refused the token) and rate_limited (429 before any API call).
	loginsBy *prometheus.CounterVec
	// stop ends the rate sampler; done is closed when it has returned.
	stop context.CancelFunc
	done chan struct{}
}

// New dials the node lazily (gRPC connects on the first call) and parses
// the templates.
func New(cfg Config) (*Server, error) {
	if cfg.GRPCAddr == "" {
		return nil, errors.New("dashboard: no gRPC address")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, peers: map[string]*grpc.ClientConn{}, csrfKey: make([]byte, 32),
		roles: newRoleCache(), rates: newRateBook(), logins: newLoginLimiter(LoginRate, LoginBurst)}
	if _, err := rand.Read(s.csrfKey); err != nil {
		return nil, fmt.Errorf("dashboard: csrf key: %w", err)
	}
	// A brute force shows on a graph as refusals and rate limits, which
	// the logs spread over one line per guess.
	s.loginsBy = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "docket_dashboard_logins_total",
		Help: "Dashboard logins by outcome: accepted, refused (the node refused the token) or rate_limited (refused before any API call)."},
		[]string{"outcome"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.loginsBy); err != nil {
			return nil, fmt.Errorf("dashboard: metrics: %w", err)
		}
	}
	conn, err := s.dial(cfg.GRPCAddr, grpc.WithUnaryInterceptor(s.followLeader))
	if err != nil {
		return nil, err
	}
	s.conn = conn
	if s.pages, err = parsePages(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	s.routes()
	ctx, stop := context.WithCancel(context.Background())
	s.stop, s.done = stop, make(chan struct{})
	go func() {
		defer close(s.done)
		s.sampleRates(ctx)
	}()
	return s, nil
}

func (s *Server) dial(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds := s.cfg.Creds
	if creds == nil {
		creds = insecureCreds()
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(client.MaxReceiveBytes))}, extra...)
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dashboard: dial %s: %w", addr, err)
	}
	return c, nil
}

// peer is a cached connection to another server's API.
func (s *Server) peer(addr string) (*grpc.ClientConn, error) {
	if addr == s.cfg.GRPCAddr {
		return s.conn, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.peers[addr]; ok {
		return c, nil
	}
	if len(s.peers) >= maxPeers {
		// Servers that left keep their entries until here: start afresh
		// rather than refuse the ones of today.
		for a, c := range s.peers {
			_ = c.Close() // an idle connection; nothing to report
			delete(s.peers, a)
		}
	}
	c, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	s.peers[addr] = c
	return c, nil
}

// Close stops the rate sampler and closes the connections to the node
// and its peers.
func (s *Server) Close() error {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := []error{s.conn.Close()}
	for a, c := range s.peers {
		errs = append(errs, c.Close())
		delete(s.peers, a)
	}
	return errors.Join(errs...)
}

// ServeHTTP serves the dashboard. Cross-origin unsafe requests are refused
// before any handler (Sec-Fetch-Site and Origin), beside the form token.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	static, _ := fs.Sub(assets, "static") // the embed pattern guarantees it
	cop := http.NewCrossOriginProtection()
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.loginPage)
	m.Handle("POST /login", cop.Handler(http.HandlerFunc(s.login)))
	m.Handle("POST /logout", cop.Handler(s.session(s.logout)))
	m.Handle("GET /{$}", s.session(s.clusterPage))
	m.Handle("GET /queues", s.session(s.queuesPage))
	m.Handle("GET /task", s.session(s.taskPage))
	m.Handle("GET /dead", s.session(s.deadPage))
	m.Handle("POST /dead/requeue", cop.Handler(s.session(s.requeue)))
	m.Handle("GET /leases", s.session(s.leasesPage))
	m.Handle("GET /queue", s.session(s.queuePage))
	for _, a := range queueActions {
		m.Handle("POST /queue/"+a.name, cop.Handler(s.session(s.queueAction(a))))
	}
	for _, a := range taskActions {
		m.Handle("POST /task/"+a.name, cop.Handler(s.session(s.taskAction(a))))
	}
	s.mux = m
}

// view is what a handler gets: the request, its context carrying the
// viewer's token for the API, and the form token.
type view struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	secret string
	csrf   string
}

// session gives h a view; with auth on it sends a viewer without a token
// cookie to the login page, and checks a POST's form token.
func (s *Server) session(h func(*view)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := &view{w: w, r: r, ctx: r.Context()}
		if s.cfg.Auth {
			c, err := r.Cookie(CookieName)
			if err != nil || c.Value == "" {
				s.toLogin(w, r)
				return
			}
			v.secret = c.Value
			v.ctx = metadata.AppendToOutgoingContext(v.ctx, pb.MetadataAuthorization, "Bearer "+v.secret)
		}
		v.csrf = s.csrfFor(v.secret)
		if r.Method == http.MethodPost {
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(v.csrf)) != 1 {
				http.Error(w, "missing or wrong form token: reload the page and try again", http.StatusForbidden)
				return
			}
		}
		h(v)
	})
}

// csrfFor binds the form token to the viewer's token: a form rendered for
// one token does not work for another.
func (s *Server) csrfFor(secret string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + secret))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) {
	s.setCookie(w, "", -1)
	if r.Method == http.MethodGet && r.Header.Get("X-Docket-Poll") == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	http.Error(w, "log in first", http.StatusUnauthorized)
}

func (s *Server) setCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.cfg.HTTPS, SameSite: http.SameSiteStrictMode})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Auth {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "login", map[string]any{"Error": r.URL.Query().Get("error")})
}

// login checks the token against the node before keeping it: one call
// that needs a token, answered from the local replica.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Auth {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if s.limitLogin(w, r) {
		return
	}
	secret := r.PostFormValue("token")
	ctx := metadata.AppendToOutgoingContext(r.Context(), pb.MetadataAuthorization, "Bearer "+secret)
	if err := s.checkToken(ctx); err != nil {
		s.loginsBy.WithLabelValues("refused").Inc()
		s.render(w, http.StatusUnauthorized, "login", map[string]any{"Error": err.Error()})
		return
	}
	s.loginsBy.WithLabelValues("accepted").Inc()
	s.logins.refund(remoteIP(r))
	s.setCookie(w, secret, 0)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(v *view) {
	s.setCookie(v.w, "", -1)
	http.Redirect(v.w, v.r, "/login", http.StatusSeeOther)
}

// errBadToken is a token the cluster does not accept.
var errBadToken = errors.New("token not accepted: the cluster does not know it (unknown, revoked or expired)")

// checkToken asks the node whether ctx's token is one it knows: a stale
// GetTask of an id that cannot exist. NotFound or PermissionDenied mean
// the token is valid; only Unauthenticated means it is not.
func (s *Server) checkToken(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := pb.NewQueueClient(s.conn).GetTask(ctx, &pb.GetTaskRequest{TaskId: "-", AllowStale: true})
	switch status.Code(err) {
	case codes.OK, codes.NotFound, codes.PermissionDenied:
		return nil
	case codes.Unauthenticated:
		return errBadToken
	}
	return fmt.Errorf("cannot check the token now: %s", explain(err))
}

// fail answers an API error as a page: to the login page when the token
// is no longer accepted, 403 when its roles or tenants do not allow the
// call, 404 for a missing task, 502 for the rest.
func (s *Server) fail(v *view, what string, err error) {
	code := http.StatusBadGateway
	switch status.Code(err) {
	case codes.Unauthenticated:
		s.toLogin(v.w, v.r)
		return
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.FailedPrecondition:
		code = http.StatusConflict
	default:
		s.log.Warn("dashboard call failed", "what", what, "err", err)
	}
	s.renderView(v, code, "error", map[string]any{"What": what, "Message": explain(err),
		"Forbidden": code == http.StatusForbidden, "Back": backURL(v.r)})
}
