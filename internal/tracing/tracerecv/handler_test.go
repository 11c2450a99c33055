package tracerecv

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func post(t *testing.T, h http.Handler, contentType, encoding string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestHandlerTakesAnExport(t *testing.T) {
	st := NewBuffer(Limits{}, nil)
	h := &Handler{Buffer: st}
	for _, tt := range []struct{ contentType, encoding string }{
		{"application/x-protobuf", ""}, {"application/protobuf; charset=binary", "gzip"},
	} {
		body := export("carmy", testSpan{trace: 1, id: byte(len(tt.encoding) + 1), name: "carmy.call"})
		if tt.encoding == "gzip" {
			body = gzipped(body)
		}
		w := post(t, h, tt.contentType, tt.encoding, body)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-protobuf" || w.Body.Len() != 0 {
			t.Errorf("%s %s: %d %q %q, want 200 and an empty ExportTraceServiceResponse", tt.contentType, tt.encoding, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
	if s := st.Stats(); s.Traces != 1 || s.Spans != 2 {
		t.Errorf("stats %+v, want the two spans of one trace", s)
	}
}

func TestHandlerRefuses(t *testing.T) {
	st := NewBuffer(Limits{}, nil)
	h := &Handler{Buffer: st, MaxBody: 1024}
	good := export("carmy", testSpan{trace: 1, id: 1})
	for _, tt := range []struct {
		name                  string
		contentType, encoding string
		body                  []byte
		status                int
		message               string
	}{
		{"text", "text/plain", "", []byte(`{}`), http.StatusUnsupportedMediaType, "application/x-protobuf or application/json"},
		{"not OTLP/JSON", "application/json", "", []byte(`{"resourceSpans":1}`), http.StatusBadRequest, "malformed OTLP trace export"},
		{"no content type", "", "", good, http.StatusUnsupportedMediaType, "Content-Type"},
		{"another encoding", "application/x-protobuf", "br", good, http.StatusUnsupportedMediaType, "gzip"},
		{"not protobuf", "application/x-protobuf", "", []byte("hello, world"), http.StatusBadRequest, "malformed OTLP trace export"},
		{"not gzip", "application/x-protobuf", "gzip", good, http.StatusBadRequest, "gzip"},
		{"too large", "application/x-protobuf", "", make([]byte, 1025), http.StatusRequestEntityTooLarge, "larger than 1024 bytes"},
		{"too large once decompressed", "application/x-protobuf", "gzip", gzipped(make([]byte, 4096)), http.StatusRequestEntityTooLarge, "decompressed"},
	} {
		w := post(t, h, tt.contentType, tt.encoding, tt.body)
		if w.Code != tt.status || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") || !strings.Contains(w.Body.String(), tt.message) {
			t.Errorf("%s: %d %q, want %d saying %q", tt.name, w.Code, w.Body, tt.status, tt.message)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/traces", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Errorf("GET: %d, Allow %q; want 405, Allow: POST", w.Code, w.Header().Get("Allow"))
	}
	if s := st.Stats(); s.Spans != 0 {
		t.Errorf("the buffer kept %d spans of refused exports", s.Spans)
	}
}

// TestHandlerReportsDroppedSpans: spans the buffer drops are a partial
// success in the answer.
func TestHandlerReportsDroppedSpans(t *testing.T) {
	h := &Handler{Buffer: NewBuffer(Limits{Traces: 10, Spans: 1}, nil)}
	w := post(t, h, "application/x-protobuf", "", export("carmy", testSpan{trace: 1, id: 1}, testSpan{trace: 1, id: 2}))
	raw, _ := io.ReadAll(w.Body)
	if w.Code != http.StatusOK || len(raw) == 0 || !bytes.Contains(raw, []byte("full")) {
		t.Errorf("%d %q, want 200 with a partial success", w.Code, raw)
	}
}

func TestHandlerTakesOTLPJSON(t *testing.T) {
	st := NewBuffer(Limits{}, nil)
	h := &Handler{Buffer: st}
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"carmy"}}]},` +
		`"scopeSpans":[{"spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","name":"carmy.call",` +
		`"startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`
	w := post(t, h, "application/json; charset=utf-8", "", []byte(body))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != "{}" {
		t.Errorf("%d %q %q, want 200 and {}", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	if tr := st.Traces(); len(tr) != 1 || tr[0].Spans[0].Name != "carmy.call" || serviceName(tr[0].Spans[0].Resource) != "carmy" {
		t.Errorf("traces %+v, want the call's", tr)
	}
	h = &Handler{Buffer: NewBuffer(Limits{Spans: 1}, nil)}
	two := strings.Replace(body, `"name":"carmy.call",`, `"name":"a"},{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b8",`, 1)
	w = post(t, h, "application/json", "", []byte(two))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"rejectedSpans":"1"`) {
		t.Errorf("%d %q, want a partial success rejecting 1 span", w.Code, w.Body)
	}
}
