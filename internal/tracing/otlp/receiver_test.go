package otlp_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// received is one request a receiver got.
type received struct {
	at     time.Time
	path   string
	header http.Header
	req    *coltracepb.ExportTraceServiceRequest
}

// receiver is an OTLP/HTTP receiver on 127.0.0.1: it decodes each
// request's body (gunzipped when it says gzip) with the generated OTLP
// types, keeps it, and answers as answer says for the nth request (from
// 0), or 200 with an empty protobuf answer when answer is nil.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	fail []string
}

func startReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	rcv := &receiver{}
	rcv.Server = httptest.NewServer(rcv.handler(answer))
	t.Cleanup(rcv.Close)
	return rcv
}

func (rcv *receiver) handler(answer func(n int, w http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				rcv.failed("not gzip: " + err.Error())
				http.Error(w, "bad gzip", http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if r.Method != http.MethodPost || err != nil {
			rcv.failed(r.Method + " " + r.URL.Path + ": not an OTLP protobuf export")
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		n := len(rcv.got)
		rcv.got = append(rcv.got, received{at: time.Now(), path: r.URL.Path, header: r.Header.Clone(), req: &req})
		rcv.mu.Unlock()
		if answer != nil {
			answer(n, w)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}
}

func (rcv *receiver) failed(why string) {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	rcv.fail = append(rcv.fail, why)
}

// requests returns the requests received so far, and fails t for any
// that was not an OTLP/HTTP protobuf export.
func (rcv *receiver) requests(t *testing.T) []received {
	t.Helper()
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, f := range rcv.fail {
		t.Errorf("receiver: %s", f)
	}
	return append([]received(nil), rcv.got...)
}

// spanNames returns the names of the spans of r, in order.
func spanNames(r received) []string {
	var names []string
	for _, rs := range r.req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	return names
}
