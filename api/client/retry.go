package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how often and how patiently a request is retried.
//
// What is retried (see Client.Call for the full rules): transport errors
// (a refused dial, a reset connection, an EOF, an attempt that timed out),
// UNAVAILABLE and RATE_LIMITED answers, a proxy's 502/503/504 without the
// error envelope, and, for a call, EXECUTION_UNCERTAIN while the execution
// is running. A call without request_id (NoRequestID) is retried only
// when it certainly did not run: a refused dial, UNAVAILABLE,
// RATE_LIMITED. Nothing else is retried: not IDEMPOTENCY_CONFLICT,
// INVALID_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND, UNKNOWN_TOOL,
// METHOD_NOT_ALLOWED, PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE,
// IDEMPOTENCY_CAPACITY, INVALID_STATE, INTERNAL, EXECUTION_UNCERTAIN of an
// interrupted execution, a certificate the client refuses, nor an https://
// URL whose server speaks plain HTTP.
//
// The wait before attempt n+1 is an exponential backoff with jitter,
// uniformly drawn from [d/2, d] where d = min(MaxDelay, BaseDelay·2^(n-1));
// when the answer carried Retry-After, the wait is at least that, capped
// at MaxDelay. The context's deadline bounds everything: when it would
// pass during the wait, the client stops at once rather than sleep.
type RetryPolicy struct {
	// MaxAttempts is the most times one request is sent, the first
	// included: 1 disables retries. 0 means DefaultRetryPolicy's.
	MaxAttempts int
	// BaseDelay is the first backoff (0: the default's).
	BaseDelay time.Duration
	// MaxDelay caps every wait, Retry-After included (0: the default's).
	MaxDelay time.Duration
	// AttemptTimeout, when positive, bounds each attempt (a call waits for
	// its tool, so set it above the tool's timeout, or accept that a cut
	// attempt's retry meets EXECUTION_UNCERTAIN and waits for the replay).
	// 0 means no bound but the context's and the http.Client's.
	AttemptTimeout time.Duration
}

// DefaultRetryPolicy is a client's policy unless WithRetry says otherwise:
// six attempts, 100 ms doubling up to 5 s (about 8 s of waiting at most).
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}

// NoRetry is a policy of a single attempt.
var NoRetry = RetryPolicy{MaxAttempts: 1}

// normalized checks p and fills its zero fields from DefaultRetryPolicy.
func (p RetryPolicy) normalized() (RetryPolicy, error) {
	if err := p.validate(); err != nil {
		return RetryPolicy{}, err
	}
	return p.withDefaults(), nil
}

// withDefaults fills zero fields from DefaultRetryPolicy.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultRetryPolicy.BaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = max(DefaultRetryPolicy.MaxDelay, p.BaseDelay)
	}
	return p
}

func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("negative MaxAttempts %d", p.MaxAttempts)
	case p.BaseDelay < 0 || p.MaxDelay < 0 || p.AttemptTimeout < 0:
		return errors.New("negative delay or timeout")
	case p.MaxDelay != 0 && p.BaseDelay > p.MaxDelay:
		return fmt.Errorf("BaseDelay %s above MaxDelay %s", p.BaseDelay, p.MaxDelay)
	}
	return nil
}

// delay returns the wait after the attempt-th attempt failed (attempt ≥ 1)
// with an answer that asked for retryAfter (0: none).
func (p RetryPolicy) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	if d > 0 {
		d = d/2 + rand.N(d/2+1)
	}
	return min(max(d, retryAfter), p.MaxDelay)
}

// retryable says whether the error of one attempt is worth another, and
// what wait the answer asked for. A request that is not idempotent (a call
// without request_id) is retried only when it certainly did not act: a
// refused connection, RATE_LIMITED, UNAVAILABLE.
func retryable(err error, req *request) (bool, time.Duration) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case CodeUnavailable, CodeRateLimited:
			return true, ae.RetryAfter
		case CodeUncertain:
			return req.call && ae.ExecStatus == StatusRunning, ae.RetryAfter
		}
		return false, 0
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		switch pe.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return req.idempotent, pe.RetryAfter
		}
		return false, 0
	}
	if !isTransport(err) {
		return false, 0
	}
	return req.idempotent || neverSent(err), 0
}

// transportError marks an error of sending a request or reading its answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// isTransport reports a transport error that another attempt may cure:
// not a certificate the client refuses, nor a TLS handshake with a server
// that speaks plain HTTP (net/http reports that as ErrSchemeMismatch) or
// something else that is not TLS.
func isTransport(err error) bool {
	var te *transportError
	if !errors.As(err, &te) {
		return false
	}
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
	)
	return !errors.As(err, &unknownCA) && !errors.As(err, &hostname) && !errors.As(err, &invalid) &&
		!errors.As(err, &verify) && !errors.As(err, &header) && !errors.Is(err, http.ErrSchemeMismatch)
}

// neverSent reports an error that happened before any byte of the request
// left: a failed dial (refused, no route, DNS).
func neverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date. Absent or malformed is 0.
func parseRetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
