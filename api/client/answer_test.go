package client_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/api/client"
)

// TestResultKeepsTheAnswer: a Result carries the body and the header as
// the node sent them, so that a caller can check them itself (the
// fault-injection harness holds the body's "replayed" against the
// Idempotent-Replayed header).
func TestResultKeepsTheAnswer(t *testing.T) {
	const body = `{"execution_id":"exec_fake","request_id":"x","session_id":"","tool":"echo",` +
		`"status":"completed","data":1,"replayed":false,` +
		`"started_at":"2026-11-30T10:00:00.123Z","finished_at":"2026-11-30T10:00:00.140Z"}`
	_, base := fakeServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("X-Extra", "kept")
		_, _ = io.WriteString(w, body)
	})
	c, _ := newClient(t, base)
	res, err := c.Call(t.Context(), "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != body {
		t.Errorf("Raw = %s, want the body as sent: %s", res.Raw, body)
	}
	if res.Header.Get("Idempotent-Replayed") != "true" || res.Header.Get("X-Extra") != "kept" {
		t.Errorf("Header = %v, want the answer's", res.Header)
	}
	if !res.Replayed {
		t.Errorf("Replayed = false with Idempotent-Replayed: true")
	}
}

// TestToolRan: APIError.ToolRan is the envelope's tool_ran, nil when
// absent or not a boolean.
func TestToolRan(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  *bool
	}{
		{"ran", map[string]any{"tool_ran": true, "execution_id": "exec_1"}, &yes},
		{"refused before reserving", map[string]any{"tool_ran": false}, &no},
		{"absent", nil, nil},
		{"null", map[string]any{"tool_ran": nil}, nil},
		{"not a boolean", map[string]any{"tool_ran": "yes"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := fakeServer(t, envelope(http.StatusServiceUnavailable, client.CodeUnavailable, tc.extra))
			c, _ := newClient(t, base, client.WithRetry(client.NoRetry))
			_, err := c.Call(t.Context(), "echo", nil)
			ae := asAPIError(t, err)
			switch {
			case ae.Status != http.StatusServiceUnavailable || !errors.Is(err, client.ErrUnavailable):
				t.Fatalf("error %v, want 503 UNAVAILABLE", err)
			case (ae.ToolRan == nil) != (tc.want == nil) || ae.ToolRan != nil && *ae.ToolRan != *tc.want:
				t.Fatalf("ToolRan = %v, want %v", deref(ae.ToolRan), deref(tc.want))
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// TestResolvedBy: an execution's resolved_by is Execution.ResolvedBy.
func TestResolvedBy(t *testing.T) {
	_, base := fakeServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"execution_id":"exec_1","request_id":"r","session_id":"","tool":"echo",`+
			`"status":"completed","data":1,"resolved":true,"resolved_by":"probe",`+
			`"started_at":"2026-11-30T10:00:00.123Z","finished_at":"2026-11-30T10:00:00.140Z"}`)
	})
	c, _ := newClient(t, base)
	exec, err := c.Lookup(t.Context(), "r", "")
	if err != nil || !exec.Resolved || exec.ResolvedBy != "probe" {
		t.Fatalf("Lookup = %+v, %v; want resolved by probe", exec, err)
	}
}
