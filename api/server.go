package api

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// Config configures the server.
type Config struct {
	Auth Auth
	// BodyLimit bounds a request body in bytes (DefaultBodyLimit when 0).
	BodyLimit int64
	Logger    *slog.Logger
	// Cluster serves docs/api.md#cluster-administration (nil: a node on its own).
	Cluster Cluster
	// Ledger serves the audit ledger (GET /v1/audit; nil: a node that
	// keeps none, whose audit routes answer 404).
	Ledger Ledger
	// Peer, when set, serves the node-to-node endpoints under /internal/
	// (cluster.Node.PeerHandler; the path is the peer protocol's, package
	// cluster/peer); it authenticates its callers itself.
	Peer http.Handler
	// Internal is served as Peer when Peer is nil.
	//
	// Deprecated: use Peer.
	Internal http.Handler
	// Metrics is told what the server does and serves GET /metrics
	// (package metrics/prom: Prometheus). Nil counts nothing and serves
	// no /metrics.
	Metrics Metrics
	// Timeouts bound slow clients (carmy.Runtime.Serve applies them to its
	// http.Server).
	Timeouts Timeouts
	// RateLimit bounds each principal's requests on this node (off when
	// PerSecond is 0).
	RateLimit RateLimit
	// AuthFailures bounds and logs failed authentication per client
	// address (on by default: DefaultAuthFailuresPerMinute): wrong tokens,
	// and apart from them wrong cluster keys at /internal/.
	AuthFailures AuthFailures
	// Pprof serves the Go runtime's profiles under /debug/pprof/: to the
	// admin token when auth is on, to anyone who reaches the API when it
	// is off (logged at WARN). Off by default, as in etcd
	// (--enable-pprof), Consul and Nomad (enable_debug): a profile shows
	// the command line, which may hold secrets, and costs CPU on demand.
	// Off, /debug/pprof/ is no route (404 NOT_FOUND).
	Pprof bool
	// TLS, when set, serves the API over HTTPS with it (carmy.Runtime.Serve
	// applies it to the listener): a request that comes over plain HTTP is
	// answered 400 INVALID_REQUEST, except under /internal/, which node
	// TLS governs.
	TLS *tls.Config
	// NodeTLS, when set, serves the TLS connections that name
	// tlsmux.NodeServerName: other nodes, over mutual TLS (see
	// cluster.Node.ServerTLSConfig). The peer handler checks them.
	NodeTLS *tls.Config
	// NodeID names this node in GET /v1/activity; when empty, the
	// runtime's (Config().NodeID), if it tells one.
	NodeID string
	// AllowedHosts are the names a request's Host may give besides IP
	// literals, localhost and OwnHosts: names, or *.suffix for every name
	// under suffix; ["*"] turns the check off. The check is on when auth
	// is off, and whenever AllowedHosts is given (hosts.go).
	AllowedHosts []string
	// OwnHosts are the node's own names, allowed whenever the Host check
	// is on: the hosts (or host:port) of its listen address and of
	// PublicURL.
	OwnHosts []string
	// PublicURL is the base URL clients reach the node at (scheme and
	// host, no path), for the documents that name the node (the /mcp
	// protected-resource metadata). Empty: the listener's own address,
	// over https when TLS is set. A request's Host is never used.
	PublicURL string
	// TrustedProxies are the networks of reverse proxies whose
	// X-Forwarded-For is believed: a request from one is keyed, for the
	// failed-authentication lockout and the rate limits of addresses, on
	// the rightmost address of X-Forwarded-For that is not itself a
	// trusted proxy (clientaddr.go). None by default.
	TrustedProxies []netip.Prefix
	// MCP makes the endpoint served at /mcp (package api/mcp:
	// mcp.Endpoint, or mcp.EndpointWith for upstream MCP servers). Nil
	// serves no /mcp.
	MCP MCP
}

// Timeouts bound what a client may take. Zero fields take the defaults.
// There is no server-wide write timeout, which would also run while a
// call's tool runs: Write starts when the answer does.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers (default 10 s): a
	// client that sends them slowly is cut off.
	ReadHeader time.Duration
	// Body bounds reading a request's body once its headers are in
	// (default 60 s). It is set on the connection for the body only, not
	// as http.Server.ReadTimeout, which would also end the context of a
	// call whose tool runs longer.
	Body time.Duration
	// Write bounds writing an answer once it starts (default 30 s): a
	// client that does not read it is cut off. The wait for a tool before
	// the answer is not counted.
	Write time.Duration
	// Idle bounds a kept-alive connection between requests (default 2 min).
	Idle time.Duration
	// HeaderBytes bounds a request's line and headers (default 64 KiB):
	// more is answered 431 with the envelope, code INVALID_REQUEST
	// (headers.go). carmy.Runtime.Serve serves with
	// ServerMaxHeaderBytes.
	HeaderBytes int
}

// Defaults of Timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultHeaderBytes       = 64 << 10
)

// WithDefaults returns t with every zero field set to its default.
func (t Timeouts) WithDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Body <= 0 {
		t.Body = DefaultBodyTimeout
	}
	if t.Write <= 0 {
		t.Write = DefaultWriteTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	if t.HeaderBytes <= 0 {
		t.HeaderBytes = DefaultHeaderBytes
	}
	return t
}

// Server is Carmy's HTTP API. It is an http.Handler.
type Server struct {
	rt   Runtime
	auth *authenticator
	// base gives a request's base URL (publicurl.go).
	base  func(*http.Request) string
	limit int64
	// bodyTimeout bounds reading one body.
	bodyTimeout time.Duration
	log         *slog.Logger
	echo        *echo.Echo
	clu         Cluster
	ledger      Ledger

	metrics Metrics
	limits  *limiters // nil: no rate limit
	guard   *authGuard
	// keyGuard counts wrong cluster keys (peerguard.go).
	keyGuard *authGuard
	// activity counts the calls answered, for GET /v1/activity.
	activity *activity
	nodeID   string
	// mcp serves /mcp (nil: Config.MCP is).
	mcp MCPEndpoint
}

// New returns a server for rt.
func New(rt Runtime, cfg Config) (*Server, error) {
	if rt == nil {
		return nil, errors.New("api: nil runtime")
	}
	if err := cfg.Auth.Validate(); err != nil {
		return nil, err
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	guard := newAuthGuard(cfg.AuthFailures, cfg.Logger, cfg.Metrics)
	keyGuard := newAuthGuard(cfg.AuthFailures, cfg.Logger, cfg.Metrics, clusterKeyGuard)
	au, err := newAuthenticator(cfg.Auth, guard, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &Server{rt: rt, auth: au, limit: cfg.BodyLimit, log: cfg.Logger, clu: cfg.Cluster, ledger: cfg.Ledger, metrics: cfg.Metrics,
		bodyTimeout: cfg.Timeouts.WithDefaults().Body, guard: guard, keyGuard: keyGuard, activity: newActivity(time.Now), nodeID: cfg.NodeID}
	if rc, ok := rt.(interface{ Config() engine.Config }); ok && s.nodeID == "" {
		s.nodeID = rc.Config().NodeID
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: s.logPanic}))
	if cfg.RateLimit.PerSecond < 0 || cfg.RateLimit.Burst < 0 {
		return nil, errors.New("api: negative rate limit")
	}
	if cfg.RateLimit.PerSecond > 0 {
		s.limits = newLimiters(cfg.RateLimit)
	}
	e.Pre(limitHeaders(cfg.Timeouts.WithDefaults().HeaderBytes))
	e.Pre(boundWrite(cfg.Timeouts.WithDefaults().Write))
	if err := ValidatePublicURL(cfg.PublicURL); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	guard.clients = clientAddrs{trusted: cfg.TrustedProxies}
	keyGuard.clients = guard.clients
	hosts, err := newHostCheck(cfg.Auth.Enabled(), cfg.AllowedHosts, append(slices.Clone(cfg.OwnHosts), hostOfURL(cfg.PublicURL)))
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	e.Pre(hosts.middleware)
	if cfg.TLS != nil {
		e.Pre(requireTLS)
	}
	e.Pre(strictQuery)
	s.echo = e
	s.base = baseURL(cfg.PublicURL, cfg.TLS != nil)
	s.routes()
	if err := s.mcpRoutes(cfg.MCP, rt, cfg.BodyLimit, s.base); err != nil {
		return nil, fmt.Errorf("api: mcp: %w", err)
	}
	s.clusterRoutes()
	s.ledgerRoutes()
	s.consoleRoutes()
	s.metricsRoutes(cfg.Metrics.Handler(cfg.Logger))
	if cfg.Pprof {
		s.pprofRoutes()
		if !cfg.Auth.Enabled() {
			s.log.Warn("serving /debug/pprof/ without authentication: anyone who reaches the API can read profiles and the command line")
		}
	}
	peer := cfg.Peer
	if peer == nil {
		peer = cfg.Internal
	}
	if peer != nil {
		e.Any("/internal/*", echo.WrapHandler(s.guardPeer(peer)))
	}
	return s, nil
}

func (s *Server) routes() {
	e := s.echo
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openapi)

	// Middleware is attached per route, not to a group: a group with
	// middleware catches every method on its prefix, which would turn a
	// wrong method into 404 instead of 405.
	auth, limit := s.auth.authenticate, s.limitRate
	e.POST("/v1/tools/call", s.callTool, s.meterCalls, auth, limit)
	e.GET("/v1/tools", s.listTools, auth, limit)
	e.GET("/v1/executions", s.findExecutions, auth, limit)
	e.GET("/v1/executions/:id", s.getExecution, auth, limit)
	e.POST("/v1/executions/:id/cancel", s.cancelExecution, s.audited(ActionCancel), auth, limit)
	e.POST("/v1/executions/:id/resolve", s.resolveExecution, s.audited(ActionResolve), auth, limit)
	e.POST("/v1/executions/:id/approve", s.approveExecution, s.audited(ActionApprove), auth, limit)
	e.POST("/v1/executions/:id/deny", s.denyExecution, s.audited(ActionDeny), auth, limit)
	e.GET("/v1/activity", s.getActivity, auth, requireAdmin)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Close stops the server's background work and logs the counts of failed
// authentication not yet logged. Call it once the HTTP server serving s
// has shut down (carmy.Runtime.Serve does); s still answers after it, but
// logs no more pending counts. It is safe to call more than once.
func (s *Server) Close() {
	s.guard.close()
	s.keyGuard.close()
	s.CloseStreams()
}

// CloseStreams ends the streams of /mcp that last until their client
// leaves (list_changed notifications): give it to
// http.Server.RegisterOnShutdown, which does not wait for them.
func (s *Server) CloseStreams() {
	if s.mcp != nil {
		s.mcp.CloseStreams()
	}
}

// logPanic logs a recovered panic and turns it into an error without a
// code, so that the answer is INTERNAL whatever the panic carried (a
// panic with store.ErrUnavailable must not claim the tool did not run).
func (s *Server) logPanic(_ echo.Context, err error, stack []byte) error {
	s.log.Error("handler panicked", slog.Any("err", err), slog.String("stack", string(stack)))
	return fmt.Errorf("handler panicked: %v", err)
}

// requireTLS refuses a request made over plain HTTP to a server whose API
// is HTTPS, before anything else reads it. The node-to-node endpoints
// check their callers themselves.
func requireTLS(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.TLS == nil && !strings.HasPrefix(r.URL.Path, "/internal/") {
			return newError(store.CodeInvalidRequest, "this node serves its API over HTTPS only: use https://")
		}
		return next(c)
	}
}

// boundWrite gives each answer d to be written, counted from the moment
// its header is written: a client that stops reading is cut off, while
// the wait for a tool before the answer is not bounded here. An answer
// that streams for a known time after its header (a trace of N seconds)
// sets that time under streamKey, and gets it on top of d. The deadline a
// previous answer on the connection left is lifted first.
func boundWrite(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			rc := http.NewResponseController(c.Response().Writer)
			if rc.SetWriteDeadline(time.Time{}) == nil {
				c.Response().Before(func() {
					streams, _ := c.Get(streamKey).(time.Duration)
					_ = rc.SetWriteDeadline(time.Now().Add(d + streams))
				})
			}
			return next(c)
		}
	}
}
