package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
)

// Headers over the limit (Timeouts.HeaderBytes) are answered 431 with
// the envelope, code INVALID_REQUEST, in one of two places:
//
//   - up to ServerMaxHeaderBytes (twice the limit), net/http reads them and
//     limitHeaders refuses the request through the error handler;
//   - past it, net/http stops reading and answers 431 itself, in plain
//     text, before any handler runs: the server's listener
//     (carmy.Runtime.Serve) replaces that answer with
//     OversizedHeadersAnswer, the same envelope.

// ServerMaxHeaderBytes returns the http.Server.MaxHeaderBytes to serve
// with t: twice HeaderBytes (with its default), so that headers a little
// over the limit reach limitHeaders and are refused through the error
// handler, while net/http still bounds what it buffers.
func (t Timeouts) ServerMaxHeaderBytes() int {
	n := t.WithDefaults().HeaderBytes
	if n > math.MaxInt/2 {
		return n
	}
	return 2 * n
}

// headersTooLarge is the error of headers over limit bytes: INVALID_REQUEST
// with status 431 (statusBeyondCode).
func headersTooLarge(limit int) *Error {
	return &Error{
		Code:    store.CodeInvalidRequest,
		Message: fmt.Sprintf("the request's headers are over the limit of %d bytes", limit),
		status:  http.StatusRequestHeaderFieldsTooLarge,
	}
}

// limitHeaders is Pre middleware that refuses a request whose request line
// and headers (headerBytes) are over limit bytes, before anything reads
// them.
func limitHeaders(limit int) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if headerBytes(c.Request()) > limit {
				return headersTooLarge(limit)
			}
			return next(c)
		}
	}
}

// headerBytes is the size of r's request line and header lines as they
// came on the wire (to white space net/http trims): what
// http.Server.MaxHeaderBytes bounds, without its slack of 4 KiB.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" { // net/http moves the Host header out of r.Header
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// OversizedHeadersAnswer returns the whole HTTP/1.1 answer to headers
// past ServerMaxHeaderBytes for a configured limit of limit bytes: 431 with
// the envelope of headersTooLarge, closing the connection, as net/http
// closes it. carmy.Runtime.Serve writes it in place of net/http's
// plain-text answer.
func OversizedHeadersAnswer(limit int) []byte {
	e := headersTooLarge(limit)
	body, err := json.Marshal(envelope{Error: map[string]any{"code": e.Code, "message": e.Message}})
	if err != nil { // a map of two strings always encodes
		panic(fmt.Sprintf("api: encoding the 431 answer: %v", err))
	}
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		e.status, http.StatusText(e.status), len(body), body)
}
