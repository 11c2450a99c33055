package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// boundBody bounds what the SDK reads of resp: each event of an SSE
// stream, held until complete (unitReader); a 2xx JSON answer, or the
// body of an error status (which the SDK reads whole), read here whole
// (readAnswer); any other body (which the SDK does not read), as a
// whole. over marks the call (if any) whose answer went past the bound.
func boundBody(req *http.Request, resp *http.Response, max int, over func()) {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	ok := resp.StatusCode/100 == 2
	switch {
	case mediaType == "text/event-stream" && ok:
		resp.Body = &unitBody{unitReader: unitReader{r: resp.Body, max: max, sse: true, over: func([]byte) { over() }}, Closer: resp.Body}
	case mediaType == "application/json" || !ok:
		readAnswer(req, resp, max, over)
	default:
		resp.Body = &boundedBody{rc: resp.Body, max: max, over: over}
	}
}

// readAnswer reads a body whole, in chunks, so that one past the bound
// costs the bound and no more. A 2xx answer past the bound becomes a
// JSON-RPC error answer to its request: the SDK takes a body it cannot
// read for a broken connection, dropping every call on it, while an
// error answer ends this request alone (the call's state says why).
// Another read error is left for the SDK to see.
func readAnswer(req *http.Request, resp *http.Response, max int, over func()) {
	body, err := readAll(resp.Body, resp.ContentLength, max)
	resp.Body.Close()
	resp.ContentLength = -1
	switch id, ok := requestID(req); {
	case errors.Is(err, errAnswerTooLarge) && ok && resp.StatusCode/100 == 2:
		over()
		resp.Body = io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":` + id +
			`,"error":{"code":-32603,"message":"the answer is larger than the node's result limit"}}`))
	case err != nil:
		if errors.Is(err, errAnswerTooLarge) {
			over()
		}
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	default:
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// requestID returns the JSON text of the id of the JSON-RPC request req
// carries.
func requestID(req *http.Request) (string, bool) {
	if req.GetBody == nil {
		return "", false
	}
	body, err := req.GetBody()
	if err != nil {
		return "", false
	}
	defer body.Close()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(body).Decode(&m) != nil || len(m.ID) == 0 {
		return "", false
	}
	return string(m.ID), true
}
