package otlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxResponse bounds what is read of a receiver's answer.
const maxResponse = 64 << 10

// busyError is a receiver's answer that asks for the export to be sent
// again: 429, 502, 503 or 504, after Retry-After when it says.
type busyError struct {
	status     string
	after      time.Duration
	afterGiven bool
	msg        string
}

func (e *busyError) Error() string {
	return "the receiver answered " + e.status + msg(e.msg)
}

// send posts body to the receiver until it is accepted, a non-retryable
// answer or error comes, or waiting for the next try would pass ctx's
// deadline. A busy answer (busyError) is tried again after its
// Retry-After (seconds, or an HTTP date) when it has one, else after the
// Config's Backoff, doubling at each try up to 32 times it, as the
// OTLP/HTTP rules say.
func (e *Exporter) send(ctx context.Context, body []byte) error {
	backoff := e.cfg.Backoff
	for tries := 1; ; tries++ {
		err := e.post(ctx, body)
		var busy *busyError
		if err == nil || !errors.As(err, &busy) {
			return err
		}
		wait := backoff
		if busy.afterGiven {
			wait = busy.after
		}
		backoff = min(2*backoff, 32*e.cfg.Backoff)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("%w; not tried again after %d tries: waiting %s would pass the export's timeout", err, tries, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w; %d tries: %w", err, tries, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// post sends body once: nil when the receiver accepted every span, a
// busyError when it asks for a retry, another error otherwise (a
// refusal, a partial success, no answer).
func (e *Exporter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the request: %w", err)
	}
	req.Header.Set("User-Agent", e.agent)
	for k, vs := range e.cfg.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentTypeProtobuf)
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var uerr *url.Error // its text would repeat the URL, userinfo and query included
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("reading the answer (%s): %w", resp.Status, err)
	}
	protobuf := strings.HasPrefix(resp.Header.Get("Content-Type"), contentTypeProtobuf)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if !protobuf {
			return nil
		}
		return partialSuccess(answer)
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		after, given := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return &busyError{status: resp.Status, after: after, afterGiven: given, msg: errorMessage(answer, protobuf)}
	default:
		return fmt.Errorf("the receiver refused the spans: %s%s", resp.Status, msg(errorMessage(answer, protobuf)))
	}
}

// retryAfter reads a Retry-After header: a number of seconds or an HTTP
// date (from now); given is false when there is none or it is neither.
func retryAfter(v string, now time.Time) (after time.Duration, given bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// msg is ": m", or nothing for an empty m.
func msg(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}
