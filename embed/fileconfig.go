package embed

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/oauth"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/store/audit"
)

// FileConfig is the model of the config file (docs/config.md): tools, MCP
// servers, auth, limits, egress, the API's access and the audit ledger.
// LoadConfig reads one; NewConfig applies it, through Settings.File.
type FileConfig struct {
	Tools []ToolConfig `yaml:"tools"`
	// MCPServers are upstream MCP servers whose tools Carmy serves as
	// <name>.<tool> (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway; package mcpgateway).
	MCPServers []MCPServerConfig `yaml:"mcp_servers"`
	DemoTools  bool              `yaml:"demo_tools"`
	Auth       AuthConfig        `yaml:"auth"`
	Limits     LimitsConfig      `yaml:"limits"`
	Egress     EgressConfig      `yaml:"egress"`
	// API is how clients reach the API: allowed Host names, trusted
	// proxies, the public URL (access.go).
	API AccessConfig `yaml:"api"`
	// Audit configures the audit ledger (docs/audit.md).
	Audit AuditConfig `yaml:"audit"`
}

// AuditConfig is the audit ledger's section of the config file.
type AuditConfig struct {
	// Retention is how long ledger entries are kept: a duration (72h),
	// days (400d) or off; empty is defaultAuditRetention.
	Retention string `yaml:"retention"`
	// SigningKey, when set, is the path of an Ed25519 private key (PEM,
	// PKCS #8: `carmy audit keygen`) the leader (on a fleet, any node) signs
	// checkpoints with.
	SigningKey string `yaml:"signing_key"`
}

// signingKey reads audit.signing_key (nil when unset).
func (a AuditConfig) signingKey() (ed25519.PrivateKey, error) {
	if a.SigningKey == "" {
		return nil, nil
	}
	data, err := os.ReadFile(a.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("audit.signing_key: %w", err)
	}
	key, err := audit.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("audit.signing_key %s: %w", a.SigningKey, err)
	}
	return key, nil
}

// defaultAuditRetention is audit.retention when the config file sets none.
const defaultAuditRetention = "400d"

// retention returns audit.retention (0: keep every entry).
func (a AuditConfig) retention() (time.Duration, error) {
	s := a.Retention
	if s == "" {
		s = defaultAuditRetention
	}
	d, err := ParseRetention(s)
	if err != nil {
		return 0, fmt.Errorf("audit.retention %q: want off, a duration such as 720h, or days such as 400d", s)
	}
	return d, nil
}

// EgressConfig bounds where HTTP tools may connect (package
// internal/egress).
type EgressConfig struct {
	// Allow, when set, lists the only networks (CIDRs such as
	// 10.0.0.0/8, or single addresses) HTTP tools may connect to; a tool's
	// http.allow_networks may narrow it. Unset: any address but the
	// built-in deny list (unspecified, link-local, cloud metadata), which
	// applies on top of Allow too unless Allow names such an address at
	// least as narrowly (169.254.169.254/32 opens it; 0.0.0.0/0 does not).
	// Loopback is reachable unless Allow leaves it out.
	Allow []string `yaml:"allow"`
}

// ToolConfig is an entry of tools: an HTTP tool (only HTTP tools can be
// declared in the file), its schema, timeout, dedupe window and policy.
type ToolConfig struct {
	Name             string `yaml:"name"`
	Description      string `yaml:"description"`
	InputSchema      any    `yaml:"input_schema"`
	Timeout          string `yaml:"timeout"`
	RequireRequestID bool   `yaml:"require_request_id"`
	// DedupeWindow (a Go duration such as 10m) makes calls without a
	// request_id idempotent for that long (docs/mcp.md#calls-without-a-request-id-dedupe_window); require_request_id
	// wins.
	DedupeWindow string `yaml:"dedupe_window"`
	// Effects and RetryUncertain are the tool's policy (docs/policy.md).
	EffectsConfig `yaml:",inline"`
	HTTP          *HTTPConfig `yaml:"http"`
	// Reconcile, when set, is the tool's reconcile probe (docs/config.md#reconcile-probes).
	Reconcile *ReconcileConfig `yaml:"reconcile"`
}

// ReconcileConfig is an HTTP tool's reconcile probe: a GET of URL, with
// {idempotency_key}, {execution_id}, {request_id} and {fencing_token}
// replaced by an interrupted execution's, tried for GiveUpAfter (a Go
// duration; default 24h) after the execution started.
type ReconcileConfig struct {
	URL         string `yaml:"url"`
	GiveUpAfter string `yaml:"give_up_after"`
}

// HTTPConfig is a tool's http section: the upstream it calls (${VAR}
// expanded in url and headers) and where it may connect.
type HTTPConfig struct {
	URL     string            `yaml:"url"`
	Method  string            `yaml:"method"`
	Headers map[string]string `yaml:"headers"`
	// FollowRedirects follows redirects to the same scheme, host and port,
	// without the configured headers; off (the default), a redirect fails
	// the call with UPSTREAM_STATUS. A redirect elsewhere is never
	// followed.
	FollowRedirects bool `yaml:"follow_redirects"`
	// AllowNetworks, when set, lists the only networks this tool may
	// connect to, instead of egress.allow; with egress.allow set, each one
	// must lie within it.
	AllowNetworks []string `yaml:"allow_networks"`
}

// MCPServerConfig is an upstream MCP server: url (Streamable HTTP) or
// command (stdio, one child process per node).
type MCPServerConfig struct {
	Name    string            `yaml:"name"`
	URL     string            `yaml:"url"`
	Command []string          `yaml:"command"`
	Headers map[string]string `yaml:"headers"`
	// Tools, when set, lists the only upstream tools served: a list of
	// names, or a map of them to their policy ({effects: read_only}).
	Tools            *MCPToolsConfig `yaml:"tools"`
	Timeout          string          `yaml:"timeout"`
	RequireRequestID bool            `yaml:"require_request_id"`
	// TrustAnnotations lets the upstream's annotations decide the effects
	// of the tools tools: does not set (docs/policy.md).
	TrustAnnotations bool `yaml:"trust_annotations"`
	// DedupeWindow is as a tool's (docs/mcp.md#calls-without-a-request-id-dedupe_window).
	DedupeWindow string `yaml:"dedupe_window"`
	// AllowNetworks narrows where url may connect, as a tool's
	// http.allow_networks does (within egress.allow when that is set).
	AllowNetworks []string `yaml:"allow_networks"`
	// Env is a command's whole environment besides PATH: nothing of the
	// node's reaches the child unless named here (${VAR} is read from the
	// node's environment at start; an unset one stops the start). The
	// values are redacted from the server's answers, as headers' are.
	Env map[string]string `yaml:"env"`
	// Dir is a command's working directory (default: <data-dir>/mcp/<name>,
	// created 0700).
	Dir string `yaml:"dir"`
	// CancelGrace (a Go duration) is how long a command's child has, after
	// a call of it timed out or was cancelled, to answer a ping before it
	// is killed and replaced (default 5s).
	CancelGrace string `yaml:"cancel_grace"`
	// ReconcileTool names the upstream tool that settles the interrupted
	// executions of this server's tools (docs/config.md#reconcile-probes), for
	// ReconcileGiveUpAfter (a Go duration; default 24h) after each
	// started.
	ReconcileTool        string `yaml:"reconcile_tool"`
	ReconcileGiveUpAfter string `yaml:"reconcile_give_up_after"`
}

// AuthConfig is the auth section: the tokens and their principals, the
// admin and metrics tokens, an OAuth issuer. Tokens are named by the
// variable that holds them or by their SHA-256, never written here.
type AuthConfig struct {
	Tokens        []TokenConfig `yaml:"tokens"`
	AdminTokenEnv string        `yaml:"admin_token_env"`
	// AdminTokenSHA256 is the admin token's SHA-256 (hex), instead of
	// admin_token_env: the file then holds no secret.
	AdminTokenSHA256 string `yaml:"admin_token_sha256"`
	// MetricsTokenEnv names the variable holding the token GET /metrics
	// then needs (or the admin token); or MetricsTokenSHA256 gives its
	// SHA-256. Neither: /metrics is open (api.Auth.MetricsToken).
	MetricsTokenEnv    string `yaml:"metrics_token_env"`
	MetricsTokenSHA256 string `yaml:"metrics_token_sha256"`
	// OAuth, when set, also accepts the JWT access tokens of an OAuth
	// authorization server (api.Auth.OAuth, package api/oauth).
	OAuth *OAuthConfig `yaml:"oauth"`
}

// OAuthConfig is auth.oauth: the issuer whose access tokens are accepted
// (see oauth.Config for each key).
type OAuthConfig struct {
	Issuer         string `yaml:"issuer"`
	Audience       string `yaml:"audience"`
	JWKSURL        string `yaml:"jwks_url"`
	PrincipalClaim string `yaml:"principal_claim"`
	ToolsClaim     string `yaml:"tools_claim"`
	// Refresh is a Go duration such as 10m.
	Refresh string `yaml:"refresh"`
}

// config returns the verifier's config of o (nil for none), checked: an
// error names the key at fault.
func (o *OAuthConfig) config() (*oauth.Config, error) {
	if o == nil {
		return nil, nil
	}
	c := &oauth.Config{Issuer: o.Issuer, Audience: o.Audience, JWKSURL: o.JWKSURL, PrincipalClaim: o.PrincipalClaim, ToolsClaim: o.ToolsClaim}
	if o.Refresh != "" {
		d, err := time.ParseDuration(o.Refresh)
		if err != nil {
			return nil, fmt.Errorf("auth.oauth.refresh: %q is not a Go duration such as 10m", o.Refresh)
		}
		c.Refresh = d
	}
	return c, c.Validate()
}

// TokenConfig is an entry of auth.tokens: a principal, its token, the
// tools it may call (none listed: every one) and its own quotas.
type TokenConfig struct {
	Principal string `yaml:"principal"`
	// TokenEnv names the variable holding the token; or TokenSHA256 gives
	// the token's SHA-256 (hex). Exactly one.
	TokenEnv    string   `yaml:"token_env"`
	TokenSHA256 string   `yaml:"token_sha256"`
	Tools       []string `yaml:"tools"`
	// MaxEntries bounds the records the principal may hold cluster-wide,
	// instead of limits.entries_per_principal (0: that default applies).
	MaxEntries int `yaml:"max_entries"`
	// MaxBytes bounds the bytes (store.RecordSize) the principal may hold
	// cluster-wide, instead of limits.bytes_per_principal (0: that default
	// applies).
	MaxBytes int64 `yaml:"max_bytes"`
}

// LimitsConfig is the limits section (0: the default each key names).
type LimitsConfig struct {
	// BodyBytes bounds a request body (default 1 MiB).
	BodyBytes int64 `yaml:"body_bytes"`
	// ResultBytes bounds one tool result (default 1 MiB).
	ResultBytes int `yaml:"result_bytes"`
	// HeaderBytes bounds a request's headers (default 64 KiB).
	HeaderBytes int `yaml:"header_bytes"`
	// MaxRunning bounds the tools running at once on this node (default
	// carmy.DefaultMaxRunning).
	MaxRunning int `yaml:"max_running"`
	// MaxRunningPerPrincipal bounds the tools each principal but the admin
	// runs at once on this node; over it a call answers 503 UNAVAILABLE
	// naming the principal, before anything is reserved. The admin counts
	// against max_running only, and the others together never take the
	// last max_running/8 slots (at least 1), kept for the admin. Default:
	// max_running/4 (at least 1) when auth names a token principal; none
	// with auth off.
	MaxRunningPerPrincipal int `yaml:"max_running_per_principal"`
	// MaxBytes bounds the bytes of the replicated store (store.RecordSize
	// summed over every record: keys, ids, fingerprint, result data and
	// error; arguments are not stored), like --max-bytes, which wins when
	// set. Default 1 GiB. The leader's value applies.
	MaxBytes int64 `yaml:"max_bytes"`
	// BytesPerPrincipal bounds the bytes each principal may hold
	// cluster-wide (the admin and anonymous included), unless its token
	// sets max_bytes. A new identity whose record and one result of
	// result_bytes would not fit answers 503 IDEMPOTENCY_CAPACITY naming
	// the principal and "resource": "bytes"; a result that no longer fits
	// when the tool returns is recorded as a failure with code
	// IDEMPOTENCY_CAPACITY and no data (replayed as such). Default: a
	// quarter of max_bytes when auth names two or more token principals;
	// none otherwise.
	BytesPerPrincipal int64 `yaml:"bytes_per_principal"`
	// RatePerPrincipal bounds each principal's requests per second on this
	// node, with bursts of RateBurst (default: the rate, at least 1). 0:
	// no limit.
	RatePerPrincipal float64 `yaml:"rate_per_principal"`
	RateBurst        int     `yaml:"rate_burst"`
	// AuthFailuresPerMinute bounds the failed authentications one client
	// address may make per minute before its requests are 429
	// RATE_LIMITED (default 10; see api.AuthFailures).
	AuthFailuresPerMinute int `yaml:"auth_failures_per_minute"`
	// EntriesPerPrincipal bounds the records each principal may hold
	// cluster-wide (the admin and anonymous included), unless its token
	// sets max_entries; a new identity beyond it answers 503
	// IDEMPOTENCY_CAPACITY naming the principal. Default: a quarter of
	// --max-entries when auth names two or more token principals; none
	// otherwise (a single tenant may use the whole store).
	EntriesPerPrincipal int `yaml:"entries_per_principal"`
	// ReadHeaderTimeout, BodyTimeout, WriteTimeout and IdleTimeout bound
	// slow clients (Go durations; defaults 10s, 60s, 30s, 2m): see
	// api.Timeouts.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	BodyTimeout       time.Duration `yaml:"body_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
}

// authFailures returns the API's bound on failed authentication.
func (l LimitsConfig) authFailures() api.AuthFailures {
	return api.AuthFailures{PerMinute: l.AuthFailuresPerMinute}
}

// timeouts returns the API's bounds on slow clients.
func (l LimitsConfig) timeouts() api.Timeouts {
	return api.Timeouts{ReadHeader: l.ReadHeaderTimeout, Body: l.BodyTimeout, Write: l.WriteTimeout, Idle: l.IdleTimeout, HeaderBytes: l.HeaderBytes}
}

// LoadConfig reads and checks the config file at path (YAML, of which
// JSON is a subset; docs/config.md): unknown keys, negative limits,
// malformed networks, durations and OAuth settings are refused, the error
// naming the line or the key. An empty path is an empty config. Nothing
// is read from the environment yet: NewConfig does, through
// Settings.Getenv.
func LoadConfig(path string) (*FileConfig, error) {
	fc, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	return &fc, nil
}

// loadConfig is LoadConfig's, returning the model by value.
func loadConfig(path string) (FileConfig, error) {
	var fc FileConfig
	if path == "" {
		return fc, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, fmt.Errorf("config %s: %w", path, explainYAML(raw, err))
	}
	if l := fc.Limits; l.BodyBytes < 0 || l.ResultBytes < 0 || l.HeaderBytes < 0 || l.MaxRunning < 0 ||
		l.RatePerPrincipal < 0 || l.RateBurst < 0 || l.EntriesPerPrincipal < 0 || l.AuthFailuresPerMinute < 0 ||
		l.MaxRunningPerPrincipal < 0 || l.MaxBytes < 0 || l.BytesPerPrincipal < 0 ||
		l.ReadHeaderTimeout < 0 || l.BodyTimeout < 0 || l.WriteTimeout < 0 || l.IdleTimeout < 0 {
		return fc, fmt.Errorf("config %s: limits must not be negative", path)
	}
	for i, t := range fc.Auth.Tokens {
		if t.MaxEntries < 0 || t.MaxBytes < 0 {
			return fc, fmt.Errorf("config %s: auth.tokens[%d] (%s): max_entries and max_bytes must not be negative", path, i, t.Principal)
		}
	}
	if _, err := fc.Auth.OAuth.config(); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	if err := fc.API.validate(); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	if _, err := fc.Audit.retention(); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	if _, err := parseNetworks("egress.allow", fc.Egress.Allow); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	for i := range fc.Tools {
		if _, err := fc.allowNetworks(i); err != nil {
			return fc, fmt.Errorf("config %s: %w", path, err)
		}
	}
	for i, m := range fc.MCPServers {
		if _, err := fc.networksWithin(fmt.Sprintf("mcp_servers[%d] (%s): allow_networks", i, m.Name), m.AllowNetworks); err != nil {
			return fc, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return fc, nil
}

// allowNetworks returns the networks the i-th tool may connect to: its
// http.allow_networks, each within egress.allow when that is set; else
// egress.allow; nil for any address outside the deny list.
func (fc FileConfig) allowNetworks(i int) ([]netip.Prefix, error) {
	global, err := parseNetworks("egress.allow", fc.Egress.Allow)
	if err != nil {
		return nil, err
	}
	tc := fc.Tools[i]
	if tc.HTTP == nil || tc.HTTP.AllowNetworks == nil {
		return global, nil
	}
	return fc.networksWithin(fmt.Sprintf("tools[%d] (%s): http.allow_networks", i, tc.Name), tc.HTTP.AllowNetworks)
}

// networksWithin parses the networks at where, each of which must lie
// within egress.allow when that is set; absent (nil), egress.allow.
func (fc FileConfig) networksWithin(where string, entries []string) ([]netip.Prefix, error) {
	global, err := parseNetworks("egress.allow", fc.Egress.Allow)
	if err != nil || entries == nil {
		return global, err
	}
	own, err := parseNetworks(where, entries)
	if err != nil {
		return nil, err
	}
	for j, n := range own {
		if global != nil && !slices.ContainsFunc(global, func(g netip.Prefix) bool { return g.Bits() <= n.Bits() && g.Contains(n.Addr()) }) {
			return nil, fmt.Errorf("%s[%d]: %s is not within egress.allow", where, j, n)
		}
	}
	return own, nil
}

// parseNetworks parses the list of networks at key: nil when absent; an
// empty list, or an entry that is not a network, is an error.
func parseNetworks(key string, entries []string) ([]netip.Prefix, error) {
	if entries == nil {
		return nil, nil
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s lists no network: leave it out to allow every address outside the deny list", key)
	}
	nets := make([]netip.Prefix, len(entries))
	for j, e := range entries {
		n, err := egress.ParseNetwork(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, j, err)
		}
		nets[j] = n
	}
	return nets, nil
}

// toolSpecsLogging turns the configured tools into ToolSpecs, expanding
// ${VAR} in URLs and headers from getenv. A variable that is not set is an
// error: a tool must not call its upstream without the credentials it was
// given. An error never repeats a URL or a header's value. The HTTP tools
// log the detail of their failures to log (at WARN, redacted).
func (fc FileConfig) toolSpecsLogging(getenv func(string) string, log *slog.Logger) ([]carmy.ToolSpec, error) {
	var specs []carmy.ToolSpec
	for i, tc := range fc.Tools {
		where := fmt.Sprintf("tools[%d] (%s)", i, tc.Name)
		if tc.HTTP == nil {
			return nil, fmt.Errorf("config %s: needs an http section (only HTTP tools can be declared in the file)", where)
		}
		if engine.ReservedToolName(tc.Name) {
			return nil, fmt.Errorf("config %s: the name %s and names beginning %s. are reserved for Carmy's own tools (carmy.lookup, carmy.cancel, carmy.resolve): choose another", where, engine.ReservedPrefix, engine.ReservedPrefix)
		}
		effects, err := tc.EffectsConfig.parse()
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		allow, err := fc.allowNetworks(i)
		if err != nil {
			return nil, fmt.Errorf("config %w", err)
		}
		approval, err := tc.Approval.parse(getenv, allow)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		spec := carmy.ToolSpec{Name: tc.Name, Description: tc.Description, RequireRequestID: tc.RequireRequestID, MarksSent: true,
			Effects: effects, RetryUncertain: tc.RetryUncertain, Approval: approval}
		if tc.Timeout != "" {
			d, err := time.ParseDuration(tc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("config %s: timeout %q: want a positive duration such as 10s", where, tc.Timeout)
			}
			spec.Timeout = d
		}
		window, err := parseWindow(tc.DedupeWindow)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		spec.DedupeWindow = window
		if tc.InputSchema != nil {
			schema, err := json.Marshal(tc.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("config %s: input_schema: %w", where, err)
			}
			spec.InputSchema = schema
		}
		url, err := expand(tc.HTTP.URL, getenv)
		if err != nil {
			return nil, fmt.Errorf("config %s: url: %w", where, err)
		}
		headers := make(map[string]string, len(tc.HTTP.Headers))
		for k, v := range tc.HTTP.Headers {
			if headers[k], err = expand(v, getenv); err != nil {
				return nil, fmt.Errorf("config %s: header %s: %w", where, k, err)
			}
		}
		h := carmy.HTTPTool{
			URL: url, Method: tc.HTTP.Method, Headers: headers, FollowRedirects: tc.HTTP.FollowRedirects, AllowNetworks: allow, Logger: log,
		}
		fn, err := h.Func()
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		spec.Func = fn
		if rc := tc.Reconcile; rc != nil {
			if rc.URL == "" {
				return nil, fmt.Errorf("config %s: reconcile: needs a url", where)
			}
			if h.ReconcileURL, err = expand(rc.URL, getenv); err != nil {
				return nil, fmt.Errorf("config %s: reconcile: url: %w", where, err)
			}
			if spec.Probe, err = h.Probe(); err != nil {
				return nil, fmt.Errorf("config %s: %w", where, err)
			}
			if rc.GiveUpAfter != "" {
				d, err := time.ParseDuration(rc.GiveUpAfter)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("config %s: reconcile: give_up_after %q: want a positive duration such as 24h", where, rc.GiveUpAfter)
				}
				spec.ProbeGiveUp = d
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${VAR} with its value; an unset or empty VAR is an error.
func expand(s string, getenv func(string) string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", missing[0])
	}
	return out, nil
}

// parseWindow parses a dedupe_window: "" is none.
func parseWindow(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("dedupe_window %q: want a positive duration such as 10m", s)
	}
	return d, nil
}

// tokenFromEnv reads the token of where (how errors name it) from the
// variable env: unset, or shorter than api.MinTokenBytes, is an error that
// names the variable, never the value.
func tokenFromEnv(where, key, env string, getenv func(string) string) (string, error) {
	token := getenv(env)
	switch {
	case token == "":
		return "", fmt.Errorf("config %s: %s %s is not set", where, key, env)
	case len(token) < api.MinTokenBytes:
		return "", fmt.Errorf("config %s: the token in %s is shorter than %d bytes: use a random one, such as `carmy keygen` prints", where, env, api.MinTokenBytes)
	}
	return token, nil
}

// auth resolves the configured tokens from the environment, with the
// per-principal bounds on records. A token read from the environment is
// at least api.MinTokenBytes long.
func (fc FileConfig) auth(getenv func(string) string) (api.Auth, error) {
	a := api.Auth{MaxEntriesPerPrincipal: fc.Limits.EntriesPerPrincipal}
	var err error
	if a.OAuth, err = fc.Auth.OAuth.config(); err != nil {
		return a, fmt.Errorf("config %w", err)
	}
	if fc.Auth.AdminTokenEnv != "" && fc.Auth.AdminTokenSHA256 != "" {
		return a, fmt.Errorf("config auth: admin_token_env and admin_token_sha256 exclude each other")
	}
	a.AdminTokenSHA256 = fc.Auth.AdminTokenSHA256
	if env := fc.Auth.AdminTokenEnv; env != "" {
		var err error
		if a.AdminToken, err = tokenFromEnv("auth (admin)", "admin_token_env", env, getenv); err != nil {
			return a, err
		}
	}
	if fc.Auth.MetricsTokenEnv != "" && fc.Auth.MetricsTokenSHA256 != "" {
		return a, fmt.Errorf("config auth: metrics_token_env and metrics_token_sha256 exclude each other")
	}
	a.MetricsTokenSHA256 = fc.Auth.MetricsTokenSHA256
	if env := fc.Auth.MetricsTokenEnv; env != "" {
		var err error
		if a.MetricsToken, err = tokenFromEnv("auth (metrics)", "metrics_token_env", env, getenv); err != nil {
			return a, err
		}
	}
	for i, t := range fc.Auth.Tokens {
		var secret string
		switch {
		case t.TokenEnv != "" && t.TokenSHA256 != "":
			return a, fmt.Errorf("config auth.tokens[%d] (%s): token_env and token_sha256 exclude each other", i, t.Principal)
		case t.TokenEnv == "" && t.TokenSHA256 == "":
			return a, fmt.Errorf("config auth.tokens[%d] (%s): token_env or token_sha256 is required", i, t.Principal)
		case t.TokenEnv != "":
			var err error
			if secret, err = tokenFromEnv(fmt.Sprintf("auth.tokens[%d] (%s)", i, t.Principal), "token_env", t.TokenEnv, getenv); err != nil {
				return a, err
			}
		}
		tools := t.Tools
		if tools == nil {
			tools = []string{"*"}
		}
		a.Tokens = append(a.Tokens, api.Token{
			Principal: t.Principal, Secret: secret, SecretSHA256: t.TokenSHA256, Tools: tools, MaxEntries: t.MaxEntries, MaxBytes: t.MaxBytes,
		})
	}
	return a, a.Validate()
}
