package api_test

// BenchmarkHTTPReplay answers the same finished call again and again
// through one API server, in process and without a network: the path of a
// replay (auth, body, fingerprint, lookup, answer, metrics, call log),
// without a store write. The request and the response writer are reused,
// so what it allocates is the server's, apart from one request value per
// call (echo's context is pooled).
//
//	go test ./api -run '^$' -bench 'HTTPReplay' -benchmem -count 6

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// benchWriter is an http.ResponseWriter kept from call to call. It takes
// deadlines, as net/http's does.
type benchWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *benchWriter) Header() http.Header         { return w.header }
func (w *benchWriter) WriteHeader(status int)      { w.status = status }
func (w *benchWriter) Write(p []byte) (int, error) { return w.body.Write(p) }

func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

func (w *benchWriter) reset() {
	clear(w.header)
	w.status = 0
	w.body.Reset()
}

func BenchmarkHTTPReplay(b *testing.B) {
	body := []byte(`{"tool":"echo","arguments":{"payload":"` + benchPayload + `"},"session_id":"bench","request_id":"replayed-1"}`)
	for _, lv := range []struct {
		name  string
		level slog.Level
	}{{"log=info", slog.LevelInfo}, {"log=warn", slog.LevelWarn}} {
		b.Run(lv.name, func(b *testing.B) {
			h := benchServer(b, lv.level)
			tmpl, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/tools/call", nil)
			if err != nil {
				b.Fatal(err)
			}
			tmpl.RequestURI, tmpl.RemoteAddr = "/v1/tools/call", "127.0.0.1:40000"
			tmpl.Header = http.Header{"Content-Type": {"application/json"}, "User-Agent": {"carmy-bench"}}
			tmpl.ContentLength = int64(len(body))
			w := &benchWriter{header: http.Header{}}
			rd := bytes.NewReader(body)
			call := func() {
				w.reset()
				rd.Reset(body)
				r := new(http.Request)
				*r = *tmpl
				r.Body = io.NopCloser(rd)
				h.ServeHTTP(w, r)
			}
			call() // the first call runs the tool
			if w.status != http.StatusOK || w.header.Get("Idempotent-Replayed") != "" {
				b.Fatalf("first call: %d %s", w.status, w.body.String())
			}
			call()
			want := bytes.Clone(w.body.Bytes())
			if w.status != http.StatusOK || w.header.Get("Idempotent-Replayed") != "true" {
				b.Fatalf("replay: %d %s", w.status, w.body.String())
			}
			b.ReportAllocs()
			for b.Loop() {
				call()
				if w.status != http.StatusOK || !bytes.Equal(w.body.Bytes(), want) {
					b.Fatalf("replay: %d %s", w.status, w.body.String())
				}
			}
		})
	}
}
