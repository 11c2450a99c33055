package api

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// store.CodeRateLimited answers a principal over its rate (429).

// RateLimit bounds the requests of each principal on one node: a token
// bucket of Burst requests refilled at PerSecond. Zero PerSecond: no limit.
// The admin is not limited. Each node limits on its own, so a principal
// spreading its calls over n nodes may make n times as many.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// limiters holds one token bucket per principal. Principals are not a
// fixed set (an OAuth issuer names any number), so a bucket that is full
// again, which a new one would equal, is dropped once the map has grown
// to sweepAt.
type limiters struct {
	cfg     RateLimit
	mu      sync.Mutex
	by      map[string]*rate.Limiter
	sweepAt int
}

// minSweepAt is the least number of buckets before full ones are dropped.
const minSweepAt = 1024

func newLimiters(cfg RateLimit) *limiters {
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(math.Ceil(cfg.PerSecond)))
	}
	return &limiters{cfg: cfg, by: make(map[string]*rate.Limiter), sweepAt: minSweepAt}
}

func (l *limiters) of(principal string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.by[principal]
	if !ok {
		if len(l.by) >= l.sweepAt {
			l.dropFullLocked(time.Now())
		}
		lim = rate.NewLimiter(rate.Limit(l.cfg.PerSecond), l.cfg.Burst)
		l.by[principal] = lim
	}
	return lim
}

// dropFullLocked drops the buckets that are full at now, and sets the
// next sweep at twice the buckets left (so sweeps cost O(1) a bucket).
// l.mu is held.
func (l *limiters) dropFullLocked(now time.Time) {
	for p, lim := range l.by {
		if lim.TokensAt(now) >= float64(l.cfg.Burst) {
			delete(l.by, p)
		}
	}
	l.sweepAt = max(minSweepAt, 2*len(l.by))
}

// limitRate is middleware, after authenticate, that answers 429
// RATE_LIMITED (with Retry-After) to a principal over its rate. Nothing
// else happens for such a request: no tool runs, nothing is reserved.
func (s *Server) limitRate(next echo.HandlerFunc) echo.HandlerFunc {
	if s.limits == nil {
		return next
	}
	return func(c echo.Context) error {
		if err, wait := s.overRate(callerOf(c)); err != nil {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			return err
		}
		return next(c)
	}
}

// overRate takes one request from caller's bucket: nil when it may go
// on, else RATE_LIMITED and the time until it may. The admin, a route
// without a caller and a server without limits are not limited.
func (s *Server) overRate(caller *engine.Caller) (*Error, time.Duration) {
	if s.limits == nil || caller == nil || caller.Admin && caller.Principal == AdminPrincipal {
		return nil, 0
	}
	now := time.Now()
	r := s.limits.of(caller.Principal).ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil, 0
	}
	r.CancelAt(now)
	return &Error{Code: store.CodeRateLimited, Message: fmt.Sprintf("principal %q is over its rate of %g requests per second (burst %d) on this node; retry after %s",
		caller.Principal, s.limits.cfg.PerSecond, s.limits.cfg.Burst, d.Round(time.Millisecond)),
		Extra: map[string]any{"principal": caller.Principal}}, d
}
