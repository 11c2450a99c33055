package api

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// A record's JSON is written by hand on the hot path (every call answer
// and execution lookup): its data and error are stored as compact JSON and
// copied out as they are, never decoded and encoded again, and the buffer
// is reused. The bytes mean what encoding/json would write for the same
// view; strings are escaped the same way.

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeRecord answers status with v as JSON. Data or an error that is not
// valid JSON (a store that returned garbage) is an error, so the answer is
// INTERNAL rather than broken JSON; checking costs one scan, no decoding.
func writeRecord(c echo.Context, status int, v *recordView) error {
	if (len(v.Data) > 0 && !jsonscan.Valid(v.Data)) || (len(v.Error) > 0 && !jsonscan.Valid(v.Error)) {
		return fmt.Errorf("api: execution %s: the stored data or error is not valid JSON", v.ExecutionID)
	}
	bp := bufPool.Get().(*[]byte)
	buf := appendRecord((*bp)[:0], v)
	buf = append(buf, '\n')
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(buf)
	if cap(buf) <= 64<<10 {
		*bp = buf
		bufPool.Put(bp)
	}
	return err
}

// appendRecord appends v's JSON object to dst, with the members and the
// omissions of recordView's struct tags.
func appendRecord(dst []byte, v *recordView) []byte {
	dst = append(dst, `{"execution_id":`...)
	dst = appendString(dst, v.ExecutionID)
	if v.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendString(dst, v.RequestID)
	}
	dst = append(dst, `,"session_id":`...)
	dst = appendString(dst, v.SessionID)
	dst = append(dst, `,"tool":`...)
	dst = appendString(dst, v.Tool)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, string(v.Status))
	if len(v.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, v.Data...)
	}
	if len(v.Error) > 0 {
		dst = append(dst, `,"error":`...)
		dst = append(dst, v.Error...)
	}
	if v.Replayed != nil {
		dst = append(dst, `,"replayed":`...)
		dst = strconv.AppendBool(dst, *v.Replayed)
	}
	if v.Recorded != nil {
		dst = append(dst, `,"recorded":`...)
		dst = strconv.AppendBool(dst, *v.Recorded)
	}
	if v.Resolved != nil {
		dst = append(dst, `,"resolved":`...)
		dst = strconv.AppendBool(dst, *v.Resolved)
	}
	if v.ResolvedBy != "" {
		dst = append(dst, `,"resolved_by":`...)
		dst = appendString(dst, v.ResolvedBy)
	}
	if v.Released {
		dst = append(dst, `,"released":true`...)
	}
	dst = append(dst, `,"started_at":`...)
	dst = appendString(dst, v.StartedAt)
	for _, m := range [...]struct{ name, value string }{
		{`,"finished_at":`, v.FinishedAt},
		{`,"fingerprint":`, v.Fingerprint},
		{`,"node_id":`, v.NodeID},
		{`,"principal":`, v.Principal},
	} {
		if m.value != "" {
			dst = append(dst, m.name...)
			dst = appendString(dst, m.value)
		}
	}
	if len(v.Approval) > 0 {
		dst = append(dst, `,"approval":`...)
		dst = append(dst, v.Approval...)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string, escaped as encoding/json does
// by default (jsonscan.HTMLSafe): control characters, quote and
// backslash; <, > and & (HTML safety); U+2028 and U+2029; and invalid
// UTF-8 as U+FFFD.
func appendString(dst []byte, s string) []byte {
	return jsonscan.AppendString(dst, s, jsonscan.HTMLSafe)
}
