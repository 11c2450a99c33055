package api

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/carmyhq/carmy/store"
)

// AuthFailures bounds and logs failed authentication per client address,
// so that tokens cannot be guessed quickly or quietly. A failure is an
// answer 401 to a request that presented credentials: an unknown bearer
// token, or an Authorization header that is not a bearer token. A request
// without Authorization is answered 401 but is no guess, and is not
// counted. The address is the connection's (Request.RemoteAddr), or,
// when that is one of Config.TrustedProxies, the client's address the
// proxies report in X-Forwarded-For (clientaddr.go); from any other peer
// X-Forwarded-For is never believed.
type AuthFailures struct {
	// PerMinute is how many failures one address (an IPv4 address, or an
	// IPv6 /64) may make per minute, in bursts of as many. Past it, every
	// request of that address to a route that needs a token whose token
	// is not a valid one (or that has none) is answered 429 RATE_LIMITED,
	// with Retry-After and the address as `source`, until the bucket
	// refills (one attempt per 60/PerMinute seconds). A valid token is
	// served even then: the limit is on failed attempts, so that a client
	// with a stale token cannot lock out the others of its address. 0
	// means DefaultAuthFailuresPerMinute; negative, no limit (failures
	// are still logged).
	PerMinute int
	// LogEvery bounds the log (0 means DefaultAuthFailuresLogEvery): an
	// address's first failure is logged at WARN at once, then at most one
	// line per LogEvery with the failures and refusals counted since the
	// previous line. No line holds a token, or anything derived from one.
	LogEvery time.Duration
}

// Defaults of AuthFailures.
const (
	DefaultAuthFailuresPerMinute = 10
	DefaultAuthFailuresLogEvery  = time.Minute
)

// maxAuthSources bounds the addresses authGuard remembers: past it, new
// addresses share one bucket (overflowSource), so that an attacker with
// many addresses can neither grow the table nor escape the limit.
const maxAuthSources = 10000

// overflowSource is the key of the addresses past maxAuthSources, and of
// a connection whose address does not parse.
var overflowSource = netip.Prefix{}

// authGuard counts failed authentication per address. It is safe for
// concurrent use. A goroutine, started with the first failure and ending
// when nothing is left to remember or at close, logs the counts an
// address left pending and forgets the addresses whose bucket refilled.
type authGuard struct {
	perMinute int
	every     time.Duration
	// maxSources is maxAuthSources (tests lower it).
	maxSources int
	log        *slog.Logger
	// count tells Metrics of a refusal, by result.
	count func(result string)
	now   func() time.Time
	// clients resolves a request's client address.
	clients clientAddrs
	// logMsg is the message of its log lines.
	logMsg string

	mu       sync.Mutex
	sources  map[netip.Prefix]*authSource
	sweeping bool
	closed   bool
	done     chan struct{}
}

// authSource is what authGuard remembers of one address.
type authSource struct {
	lim *rate.Limiter // nil without a limit
	// failed and refused count since lastLine.
	failed, refused int
	lastLine        time.Time
	// lastReason and lastPath are those of the latest attempt.
	lastReason, lastPath string
}

// guardKind is what one authGuard counts: the failures of one kind of
// credential, told to Metrics under its credential and logged under a
// message of its own. The server keeps two guards, so that clients that
// guess tokens never lock out the nodes that share their address, nor the
// reverse.
type guardKind struct {
	credential, logMsg string
}

var (
	tokenGuard      = guardKind{credential: CredentialToken, logMsg: "authentication failed"}
	clusterKeyGuard = guardKind{credential: CredentialClusterKey, logMsg: "cluster key refused"}
)

func newAuthGuard(cfg AuthFailures, log *slog.Logger, m Metrics, kinds ...guardKind) *authGuard {
	kind := tokenGuard
	if len(kinds) > 0 {
		kind = kinds[0]
	}
	if cfg.PerMinute == 0 {
		cfg.PerMinute = DefaultAuthFailuresPerMinute
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = DefaultAuthFailuresLogEvery
	}
	return &authGuard{
		perMinute: cfg.PerMinute, every: cfg.LogEvery, maxSources: maxAuthSources, log: log, now: time.Now, logMsg: kind.logMsg,
		count:   func(result string) { m.AuthRefused(kind.credential, result) },
		sources: make(map[netip.Prefix]*authSource), done: make(chan struct{}),
	}
}

// sourceOf returns the key of r's client address (clientaddr.go): the
// peer's, or behind a trusted proxy the client's it reports.
func (g *authGuard) sourceOf(r *http.Request) netip.Prefix { return g.clients.source(r) }

// sourceName is how logs and answers name a source.
func sourceName(src netip.Prefix) string {
	switch {
	case src == overflowSource:
		return "other addresses"
	case src.Addr().Is4():
		return src.Addr().String()
	}
	return src.String()
}

// check returns RATE_LIMITED, and sets Retry-After on h, when src is over
// its failures; nil when it may try. Callers ask it only for a request
// whose credential failed (authenticator.admit). path is logged.
func (g *authGuard) check(src netip.Prefix, path string, h http.Header) error {
	if g.perMinute < 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.sources[src]
	if st == nil && len(g.sources) >= g.maxSources {
		src, st = overflowSource, g.sources[overflowSource]
	}
	if st == nil {
		return nil
	}
	now := g.now()
	tokens := st.lim.TokensAt(now)
	if tokens >= 1 {
		return nil
	}
	wait := time.Duration((1 - tokens) / float64(st.lim.Limit()) * float64(time.Second))
	st.refused++
	st.lastReason, st.lastPath = "rate limited", path
	g.count(AuthRateLimited)
	g.noteLocked(src, st, now)
	secs := max(1, int(math.Ceil(wait.Seconds())))
	h.Set("Retry-After", strconv.Itoa(secs))
	return &Error{Code: store.CodeRateLimited,
		Message: fmt.Sprintf("too many failed authentications from %s (at most %d per minute): retry after %d s", sourceName(src), g.perMinute, secs),
		Extra:   map[string]any{"source": sourceName(src)}}
}

// fail counts a failed authentication of src, for reason (never the
// token), on path.
func (g *authGuard) fail(src netip.Prefix, reason, path string) {
	g.count(AuthUnauthorized)
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.sources[src]
	if st == nil {
		if len(g.sources) >= g.maxSources {
			src, st = overflowSource, g.sources[overflowSource]
		}
		if st == nil {
			st = &authSource{}
			if g.perMinute > 0 {
				st.lim = rate.NewLimiter(rate.Limit(float64(g.perMinute)/60), g.perMinute)
			}
			g.sources[src] = st
		}
	}
	now := g.now()
	if st.lim != nil {
		st.lim.AllowN(now, 1)
	}
	st.failed++
	st.lastReason, st.lastPath = reason, path
	g.noteLocked(src, st, now)
}

// noteLocked logs src's counts when its last line is LogEvery old, and
// otherwise leaves them to the sweeper. g.mu is held.
func (g *authGuard) noteLocked(src netip.Prefix, st *authSource, now time.Time) {
	if st.lastLine.IsZero() || now.Sub(st.lastLine) >= g.every {
		g.lineLocked(src, st, now)
	}
	if !g.sweeping && !g.closed {
		g.sweeping = true
		go g.sweep()
	}
}

// lineLocked logs and resets src's counts. g.mu is held.
func (g *authGuard) lineLocked(src netip.Prefix, st *authSource, now time.Time) {
	g.log.Warn(g.logMsg, slog.String("source", sourceName(src)),
		slog.Int("failures", st.failed), slog.Int("rate_limited", st.refused),
		slog.Duration("since_last_line", sinceLine(st.lastLine, now)),
		slog.String("last_reason", st.lastReason), slog.String("last_path", st.lastPath))
	st.failed, st.refused, st.lastLine = 0, 0, now
}

func sinceLine(last, now time.Time) time.Duration {
	if last.IsZero() {
		return 0
	}
	return now.Sub(last)
}

// sweep logs, every LogEvery, the counts left pending for that long, and
// forgets the addresses with nothing pending whose bucket refilled. It
// ends when it remembers none, or at close.
func (g *authGuard) sweep() {
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-tick.C:
		}
		g.mu.Lock()
		now := g.now()
		for src, st := range g.sources {
			pending := st.failed+st.refused > 0
			if pending && now.Sub(st.lastLine) >= g.every {
				g.lineLocked(src, st, now)
				pending = false
			}
			if !pending && now.Sub(st.lastLine) >= g.every && (st.lim == nil || st.lim.TokensAt(now) >= float64(st.lim.Burst())) {
				delete(g.sources, src)
			}
		}
		if len(g.sources) == 0 {
			g.sweeping = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}

// close stops the sweeper and logs every count left pending. The guard
// goes on counting, but logs no more pending counts after it.
func (g *authGuard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	close(g.done)
	now := g.now()
	for src, st := range g.sources {
		if st.failed+st.refused > 0 {
			g.lineLocked(src, st, now)
		}
	}
}
