package api

import (
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// overloadChecker is a Runtime that can tell it would refuse a call for
// load before the call is read (engine.Runtime.Overloaded).
type overloadChecker interface{ Overloaded(size int64) error }

// earlyRefusalBytes: a call body at least this large is refused for load
// before it is read, when the runtime would refuse it anyway (docs/operations.md#overload).
// Reading and decoding a large body only to refuse it costs a loaded
// node the CPU it lacks; small ones are cheaper to read than to guess.
const earlyRefusalBytes = 64 << 10

// refuseLargeWhenOverloaded refuses a large call (by its Content-Length)
// that the runtime would refuse for load, before its body is read.
func (s *Server) refuseLargeWhenOverloaded(c echo.Context) error {
	oc, ok := s.rt.(overloadChecker)
	n := c.Request().ContentLength
	if !ok || n < earlyRefusalBytes || n > s.limit {
		return nil // a body over the limit is refused as such (413)
	}
	err := oc.Overloaded(n)
	if err != nil {
		// Read without decoding (within the body's deadline), so that
		// the client, still sending it, reads the answer rather than a
		// broken connection.
		rc := http.NewResponseController(c.Response().Writer)
		_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Request().Body, n))
		_ = rc.SetReadDeadline(time.Time{})
	}
	return err
}
