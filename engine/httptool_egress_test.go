package engine

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// mustNotConnect is an HTTPTool control hook for tools whose every
// address the egress policy must refuse: were one accepted, the hook
// refuses it before the connection is made, so that no packet leaves the
// machine, and fails the test.
func mustNotConnect(t *testing.T) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		t.Errorf("the egress policy let %s %s through", network, address)
		return fmt.Errorf("test: no connection to %s", address)
	}
}

func TestHTTPToolEgressRefusesMetadataAndLinkLocal(t *testing.T) {
	for _, host := range []string{
		"169.254.169.254", "[fd00:ec2::254]", "100.100.100.200", "169.254.170.2", "192.0.0.192",
		"169.254.1.1", "[fe80::1%25lo]", "0.0.0.0", "[::]", "[::ffff:169.254.169.254]", "[64:ff9b::a9fe:a9fe]",
	} {
		t.Run(host, func(t *testing.T) {
			log, logs := newLog()
			app := quietApp(t)
			mustAddHTTPTool(t, app, "tool", HTTPTool{
				URL: "http://" + host + "/latest/meta-data/?token=" + secretQuery, Headers: secretHeaders(), Logger: log,
				control: mustNotConnect(t),
			}, 0)
			rec := callTool(t, app, "tool", `{}`)
			e := recordedError(t, rec)
			if rec.Status != store.StatusFailed || e["code"] != CodeEgressDenied {
				t.Fatalf("record = %s %s, want failed %s", rec.Status, rec.Error, CodeEgressDenied)
			}
			if msg, _ := e["message"].(string); msg != "tool tool: the upstream's address is not allowed by the egress policy" {
				t.Errorf("message = %q", msg)
			}
			assertNoSecret(t, "the record's error", string(rec.Error), strings.Trim(host, "[]"), "meta-data")
			assertNoSecret(t, "the log", logs.String())
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "not allowed") {
				t.Errorf("the refusal is not logged at WARN with its reason:\n%s", logs)
			}
		})
	}
}

func TestHTTPToolAllowNetworks(t *testing.T) {
	up := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{"ok":true}`))
	tests := []struct {
		name  string
		allow []string
		want  store.Status
	}{
		{"loopback by default", nil, store.StatusCompleted},
		{"an allow-list without loopback", []string{"10.0.0.0/8", "fd00::/8"}, store.StatusFailed},
		{"an allow-list with the upstream", []string{"10.0.0.0/8", "127.0.0.1/32"}, store.StatusCompleted},
		{"an allow-list of another loopback address", []string{"127.0.0.2/32"}, store.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var allow []netip.Prefix
			for _, s := range tt.allow {
				allow = append(allow, netip.MustParsePrefix(s))
			}
			before := len(up.requests())
			h := HTTPTool{URL: up.URL + "/?token=" + secretQuery, AllowNetworks: allow}
			if tt.want == store.StatusFailed {
				h.control = mustNotConnect(t)
			}
			app := quietApp(t)
			mustAddHTTPTool(t, app, "tool", h, 0)
			rec := callTool(t, app, "tool", `{}`)
			if rec.Status != tt.want {
				t.Fatalf("record = %s %s, want %s", rec.Status, rec.Error, tt.want)
			}
			sent := len(up.requests()) - before
			if tt.want == store.StatusFailed {
				if rec.ErrorCode() != CodeEgressDenied || sent != 0 {
					t.Errorf("record = %s, upstream got %d requests; want %s and none", rec.Error, sent, CodeEgressDenied)
				}
				assertNoSecret(t, "the record's error", string(rec.Error), up.URL)
			} else if sent != 1 {
				t.Errorf("the upstream got %d requests, want 1", sent)
			}
		})
	}
}

func TestHTTPToolFuncRefusesInvalidNetworks(t *testing.T) {
	if _, err := (HTTPTool{URL: "http://127.0.0.1/x", AllowNetworks: []netip.Prefix{{}}}).Func(); err == nil {
		t.Error("Func accepted an invalid network")
	}
}
