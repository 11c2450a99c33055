package embed

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/store"
)

// countingUpstream is a loopback upstream that counts its requests; a
// request to /redirect is sent to /moved.
func countingUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/moved", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"path":"` + r.URL.Path + `"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// callConfigured registers the tools of the config text (with UPSTREAM in
// the environment) and calls the one named tool.
func callConfigured(t *testing.T, text, upstream, tool string) store.Record {
	t.Helper()
	fc := mustLoadConfig(t, text)
	specs, err := fc.toolSpecsLogging(fakeEnv(map[string]string{"UPSTREAM": upstream}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("toolSpecs: %v", err)
	}
	app := quietApp()
	for _, s := range specs {
		if err := app.AddTool(s); err != nil {
			t.Fatalf("AddTool: %v", err)
		}
	}
	resp, err := app.Call(t.Context(), carmy.Caller{Principal: "p"}, carmy.Request{Tool: tool, RequestID: "r1", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	return resp.Record
}

func TestLoadConfigEgress(t *testing.T) {
	fc := mustLoadConfig(t, `egress:
  allow: [10.0.0.0/8, 127.0.0.1, "fd00::/8"]
tools:
  - name: narrow
    http: {url: "http://127.0.0.1:9/x", follow_redirects: true, allow_networks: [127.0.0.1/32, 10.1.0.0/16]}
  - name: wide
    http: {url: "http://127.0.0.1:9/x"}
`)
	if !reflect.DeepEqual(fc.Egress.Allow, []string{"10.0.0.0/8", "127.0.0.1", "fd00::/8"}) || !fc.Tools[0].HTTP.FollowRedirects || fc.Tools[1].HTTP.FollowRedirects {
		t.Fatalf("config = %+v", fc)
	}
	for i, want := range [][]string{{"127.0.0.1/32", "10.1.0.0/16"}, {"10.0.0.0/8", "127.0.0.1/32", "fd00::/8"}} {
		got, err := fc.allowNetworks(i)
		var wantNets []netip.Prefix
		for _, s := range want {
			wantNets = append(wantNets, netip.MustParsePrefix(s))
		}
		if err != nil || !reflect.DeepEqual(got, wantNets) {
			t.Errorf("allowNetworks(%d) = %v, %v; want %v", i, got, err, wantNets)
		}
	}
	if got, err := mustLoadConfig(t, oneTool("")).allowNetworks(0); got != nil || err != nil {
		t.Errorf("allowNetworks without egress settings = %v, %v; want nil", got, err)
	}
}

func TestLoadConfigRefusesBadNetworks(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"not a CIDR", "egress:\n  allow: [10.0.0/8]\n", `egress.allow[0]: "10.0.0/8" is not a network`},
		{"host bits", "egress:\n  allow: [127.0.0.1/32, 10.1.2.3/8]\n", "egress.allow[1]: \"10.1.2.3/8\" has bits set past its prefix length: did you mean 10.0.0.0/8?"},
		{"a name", "egress:\n  allow: [example.com]\n", `egress.allow[0]: "example.com" is not a network`},
		{"empty", "egress:\n  allow: []\n", "egress.allow lists no network"},
		{"not a list", "egress:\n  allow: 10.0.0.0/8\n", "cannot unmarshal"},
		{"typo", "egress:\n  allowed: [10.0.0.0/8]\n", "allowed"},
		{"tool's", oneTool("") + "    # \n", ""}, // valid; see below
		{"tool's not a CIDR", "tools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\", allow_networks: [300.0.0.0/8]}\n",
			`tools[0] (t): http.allow_networks[0]: "300.0.0.0/8" is not a network`},
		{"tool's empty", "tools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\", allow_networks: []}\n", "tools[0] (t): http.allow_networks lists no network"},
		{"tool's outside egress.allow", "egress:\n  allow: [10.0.0.0/8]\ntools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\", allow_networks: [10.1.0.0/16, 127.0.0.1]}\n",
			"tools[0] (t): http.allow_networks[1]: 127.0.0.1/32 is not within egress.allow"},
		{"tool's wider than egress.allow", "egress:\n  allow: [10.1.0.0/16]\ntools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\", allow_networks: [10.0.0.0/8]}\n",
			"tools[0] (t): http.allow_networks[0]: 10.0.0.0/8 is not within egress.allow"},
		{"follow_redirects typo", "tools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\", follow_redirect: true}\n", "follow_redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, tt.text))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig = %v, want an error with %q", err, tt.want)
			}
		})
	}
	// toolSpecs checks a config that did not come from a file the same way.
	fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &HTTPConfig{URL: "http://127.0.0.1:9/x", AllowNetworks: []string{"nope"}}}}}
	if _, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger()); err == nil || !strings.Contains(err.Error(), "http.allow_networks[0]") {
		t.Errorf("toolSpecs = %v, want an error naming http.allow_networks[0]", err)
	}
}

func TestConfiguredToolEgress(t *testing.T) {
	up, requests := countingUpstream(t)
	tests := []struct {
		name, config string
		want         string // error code, or "" for completed
	}{
		{"loopback by default", "", ""},
		{"egress.allow without loopback", "egress:\n  allow: [10.0.0.0/8]\n", "EGRESS_DENIED"},
		{"egress.allow with loopback", "egress:\n  allow: [10.0.0.0/8, 127.0.0.0/8]\n", ""},
		{"allow_networks narrower than egress.allow", "egress:\n  allow: [10.0.0.0/8, 127.0.0.0/8]\n", "EGRESS_DENIED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := "    http: {url: \"${UPSTREAM}/x\"}\n"
			if strings.HasPrefix(tt.name, "allow_networks") {
				tool = "    http: {url: \"${UPSTREAM}/x\", allow_networks: [10.0.0.0/16]}\n"
			}
			before := requests.Load()
			rec := callConfigured(t, tt.config+"tools:\n  - name: t\n"+tool, up.URL, "t")
			sent := requests.Load() - before
			if tt.want == "" {
				if rec.Status != store.StatusCompleted || sent != 1 {
					t.Errorf("record = %s %s, upstream got %d requests; want completed and 1", rec.Status, rec.Error, sent)
				}
				return
			}
			if rec.ErrorCode() != tt.want || sent != 0 {
				t.Errorf("record = %s %s, upstream got %d requests; want %s and none", rec.Status, rec.Error, sent, tt.want)
			}
		})
	}
}

func TestConfiguredToolFollowRedirects(t *testing.T) {
	up, _ := countingUpstream(t)
	rec := callConfigured(t, "tools:\n  - name: t\n    http: {url: \"${UPSTREAM}/redirect\"}\n", up.URL, "t")
	if rec.ErrorCode() != "UPSTREAM_STATUS" {
		t.Errorf("without follow_redirects: record = %s %s, want UPSTREAM_STATUS", rec.Status, rec.Error)
	}
	rec = callConfigured(t, "tools:\n  - name: t\n    http: {url: \"${UPSTREAM}/redirect\", follow_redirects: true}\n", up.URL, "t")
	if rec.Status != store.StatusCompleted || string(rec.Data) != `{"path":"/moved"}` {
		t.Errorf("with follow_redirects: record = %s %s %s, want the answer of /moved", rec.Status, rec.Data, rec.Error)
	}
}

func TestToolSpecsErrorsKeepSecretsOut(t *testing.T) {
	env := fakeEnv(map[string]string{"TOKEN": "tok-SECRET-value"})
	for _, u := range []string{"ftp://127.0.0.1/x?token=${TOKEN}", "http://u:${TOKEN}@127.0.0.1:bad/x", "${TOKEN}"} {
		fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &HTTPConfig{URL: u}}}}
		_, err := fc.toolSpecsLogging(env, discardLogger())
		if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "tools[0] (t)") {
			t.Errorf("toolSpecsLogging(url %q) = %v, want an error naming the tool but not the secret", u, err)
		}
	}
}

// A reconcile probe's answer settles an execution: its url is checked
// against the tool's egress policy when the tools are built, so that a
// config sending it outside fails to load rather than probing in vain.
func TestToolSpecsRefusesProbeOutsideEgress(t *testing.T) {
	tests := []struct{ name, config, probe, want string }{
		{"outside egress.allow", "egress:\n  allow: [10.0.0.0/8]\n", "http://127.0.0.1:9/orders/{request_id}/status",
			"config tools[0] (t): http tool: reconcile: url http://127.0.0.1:9/orders/{request_id}/status: its host 127.0.0.1 is outside the allowed networks: the egress policy does not allow it"},
		{"outside allow_networks", "", "http://127.0.0.1:9/orders/{request_id}?token=${TOKEN}",
			"config tools[0] (t): http tool: reconcile: url http://127.0.0.1:9/orders/{request_id}?[redacted]: its host 127.0.0.1 is outside the allowed networks"},
		{"a metadata address", "", "http://169.254.169.254/latest/{request_id}",
			"config tools[0] (t): http tool: reconcile: url http://169.254.169.254/latest/{request_id}: its host 169.254.169.254 is a cloud metadata address"},
		{"a placeholder in the host", "", "http://{request_id}.orders.internal/x",
			"config tools[0] (t): http tool: reconcile: the url has a placeholder in its scheme, userinfo, host or port"},
		{"within egress.allow", "egress:\n  allow: [10.0.0.0/8]\n", "http://10.1.2.3:9/orders/{request_id}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := "    http: {url: \"http://10.0.0.1:9/orders\"}\n"
			if tt.name == "outside allow_networks" {
				tool = "    http: {url: \"http://10.0.0.1:9/orders\", allow_networks: [10.0.0.0/8]}\n"
			}
			text := tt.config + "tools:\n  - name: t\n" + tool + "    reconcile: {url: \"" + tt.probe + "\"}\n"
			fc := mustLoadConfig(t, text)
			specs, err := fc.toolSpecsLogging(fakeEnv(map[string]string{"TOKEN": "tok-SECRET-value"}), discardLogger())
			if tt.want == "" {
				if err != nil || len(specs) != 1 || specs[0].Probe == nil {
					t.Fatalf("toolSpecs = %v, %v; want the tool with its probe", specs, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("toolSpecs = %v\nwant an error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error repeats a secret: %v", err)
			}
		})
	}
}
