package mcp

import (
	"bytes"
	"io"
	"net/http"
)

// readBody reads r's body if it is within the limit. Otherwise, or on an
// error, it puts back what it read in front of the rest (or of the
// error), for the SDK to read and refuse as it does.
func (h *Handler) readBody(r *http.Request) ([]byte, bool) {
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, h.cfg.BodyLimit+1))
	if err != nil || int64(len(body)) > h.cfg.BodyLimit || len(body) == 0 {
		r.Body = restoredBody(body, err, orig)
		return nil, false
	}
	return body, true
}

// restoredBody reads read, then err when there was one, else the rest of
// orig; it closes orig.
func restoredBody(read []byte, err error, orig io.ReadCloser) io.ReadCloser {
	rest := io.Reader(orig)
	if err != nil {
		rest = errReader{err}
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), rest), orig}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
