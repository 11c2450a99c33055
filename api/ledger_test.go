package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store/audit"
)

// fakeLedger serves export pages from a function.
type fakeLedger struct {
	head   audit.Head
	export func(w io.Writer, after uint64, limit int) error
}

func (f fakeLedger) AuditHead(context.Context) (audit.Head, error) { return f.head, nil }
func (f fakeLedger) AuditExport(_ context.Context, w io.Writer, after uint64, limit int) error {
	return f.export(w, after, limit)
}

// TestAuditRoutes: GET /v1/audit pages the ledger as NDJSON and GET
// /v1/audit/head names its head, for the admin only; bad parameters are
// 400, and a node without a ledger answers 404.
func TestAuditRoutes(t *testing.T) {
	head := audit.Head{Seq: 9, Hash: audit.Genesis}
	cfg := authConfig()
	cfg.Ledger = fakeLedger{head: head, export: func(w io.Writer, after uint64, limit int) error {
		_, err := fmt.Fprintf(w, "{\"after\":%d,\"limit\":%d}\n", after, limit)
		return err
	}}
	srv := newTestServer(t, &fakeRuntime{tb: t}, cfg)
	admin := []string{"Authorization", "Bearer " + adminToken}

	for path, want := range map[string]string{
		"/v1/audit":                     `{"after":0,"limit":1000}` + "\n",
		"/v1/audit?after=41&limit=7":    `{"after":41,"limit":7}` + "\n",
		"/v1/audit?limit=10000&after=0": `{"after":0,"limit":10000}` + "\n",
	} {
		a := get(t, srv, path, admin...)
		if a.status != http.StatusOK || a.header.Get("Content-Type") != api.NDJSON || string(a.body) != want {
			t.Errorf("GET %s: %d %q %s, want 200 %s %s", path, a.status, a.header.Get("Content-Type"), a.body, api.NDJSON, want)
		}
	}
	m := wantJSON(t, get(t, srv, "/v1/audit/head", admin...), http.StatusOK)
	if fmt.Sprint(m["seq"]) != "9" || m["hash"] != audit.Genesis || len(m) != 2 {
		t.Errorf("head: %v", m)
	}
	for _, path := range []string{"/v1/audit", "/v1/audit/head"} {
		wantError(t, get(t, srv, path), http.StatusUnauthorized, "UNAUTHORIZED")
		wantError(t, get(t, srv, path, "Authorization", "Bearer "+plannerToken), http.StatusForbidden, "FORBIDDEN")
	}
	for _, path := range []string{"/v1/audit?after=-1", "/v1/audit?after=x", "/v1/audit?limit=0", "/v1/audit?limit=10001", "/v1/audit?from=1", "/v1/audit/head?after=1"} {
		wantError(t, get(t, srv, path, admin...), http.StatusBadRequest, "INVALID_REQUEST")
	}

	bare := newTestServer(t, &fakeRuntime{tb: t}, authConfig())
	wantError(t, get(t, bare, "/v1/audit", admin...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, get(t, bare, "/v1/audit/head", admin...), http.StatusNotFound, "NOT_FOUND")
}
