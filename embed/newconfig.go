package embed

import (
	"fmt"
	"log/slog"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
)

// NewConfig applies the node's policy to s and returns the Config
// StartNode takes, as carmy serve does:
//
//   - auth: the file's tokens, admin and metrics tokens and OAuth issuer,
//     read through s.Getenv (none with Dev); anonymous callers only when
//     every listener is on loopback, else an *OffLoopbackError;
//   - limits: the per-principal fair shares (running tools, records,
//     bytes) and the store's byte bound, with their defaults (resolveLimits);
//   - the runtime (carmy.App with s.NodeID and the limits): the demo
//     tools with Dev or demo_tools, the file's HTTP tools, and the tools
//     of its MCP servers (Config.Upstreams, not started);
//   - the API: auth, body, header and rate limits, timeouts, the
//     failed-authentication lockout, the Host check, trusted proxies,
//     the public URL, pprof;
//   - the backend: s.Raft or s.Postgres with the store's bounds, the
//     audit ledger's retention and signing key, s.DataDir and s.Logger
//     where they are unset.
//
// Nothing listens or connects yet; a command MCP server's working
// directory may have been created. The Config's Listener is s.Listener;
// the API's TLS and the backend's security material are as s gives them,
// to complete before StartNode when they are not.
func NewConfig(s Settings) (Config, error) {
	s = s.withDefaults()
	if err := s.validate(); err != nil {
		return Config{}, err
	}
	fc := *s.File
	auth, err := nodeAuth(s, fc)
	if err != nil {
		return Config{}, err
	}
	lim, err := resolveLimits(s, fc)
	if err != nil {
		return Config{}, err
	}
	auth.MaxEntriesPerPrincipal, auth.MaxBytesPerPrincipal = lim.entriesPerPrincipal, lim.bytesPerPrincipal
	app, err := buildRuntime(s, fc, lim)
	if err != nil {
		return Config{}, err
	}
	ups, err := fc.mcpUpstreams(app, s.Getenv, s.DataDir, s.Logger)
	if err != nil {
		return Config{}, err
	}
	auditRetention, err := fc.Audit.retention()
	if err != nil {
		return Config{}, err
	}
	signingKey, err := fc.Audit.signingKey()
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Runtime: app, Listener: s.Listener, Upstreams: ups, API: apiConfig(s, fc, auth)}
	if s.Raft != nil {
		r := *s.Raft // the caller's is not changed
		r.MaxEntries, r.MaxBytes = s.MaxEntries, lim.maxBytes
		r.AuditRetention, r.AuditSigningKey = auditRetention, signingKey
		if r.DataDir == "" {
			r.DataDir = s.DataDir
		}
		if r.Logger == nil {
			r.Logger = s.Logger
		}
		cfg.Raft = &r
	} else {
		p := *s.Postgres
		p.Store.Capacity, p.Store.MaxBytes = s.MaxEntries, lim.maxBytes
		p.Fleet.AuditRetention, p.Fleet.AuditSigningKey = auditRetention, signingKey
		if p.Store.Logger == nil {
			p.Store.Logger = s.Logger
		}
		if p.Fleet.Logger == nil {
			p.Fleet.Logger = s.Logger
		}
		cfg.Postgres = &p
	}
	return cfg, nil
}

// nodeAuth reads the file's auth section (none with Dev), and refuses
// anonymous callers unless every listener is on loopback.
func nodeAuth(s Settings, fc FileConfig) (api.Auth, error) {
	var auth api.Auth
	var err error
	if s.Dev {
		s.Logger.Warn("dev mode: demo tools on, auth off; do not expose this node")
	} else if auth, err = fc.auth(s.Getenv); err != nil {
		return api.Auth{}, err
	}
	if o := auth.OAuth; o != nil {
		s.Logger.Info("accepting OAuth access tokens", slog.String("issuer", o.Issuer), slog.String("audience", o.Audience), slog.String("jwks_url", o.JWKSURL))
	}
	if !auth.Enabled() && !s.Dev {
		// Anonymous callers only when every listener is on loopback.
		listeners := []struct{ flag, addr string }{{"--http-addr", s.HTTPAddr}}
		if s.Raft != nil {
			listeners = append(listeners, struct{ flag, addr string }{"--raft-addr", s.Raft.RaftAddr},
				struct{ flag, addr string }{"--gossip-addr", s.Raft.GossipAddr})
		}
		for _, l := range listeners {
			if !carmy.IsLoopback(l.addr) {
				return api.Auth{}, &OffLoopbackError{Flag: l.flag, Addr: l.addr}
			}
		}
	}
	return auth, nil
}

// buildRuntime returns the runtime with the limits of the config file and
// its tools: the demo tools with Dev or demo_tools, and the HTTP tools
// it declares.
func buildRuntime(s Settings, fc FileConfig, lim limits) (*carmy.Runtime, error) {
	opts := []carmy.Option{carmy.WithNodeID(s.NodeID), carmy.WithLogger(s.Logger)}
	if s.NoPreviousExecutions {
		opts = append(opts, carmy.WithNoPreviousExecutions())
	}
	if fc.Limits.ResultBytes > 0 {
		opts = append(opts, carmy.WithMaxResultBytes(fc.Limits.ResultBytes))
	}
	switch {
	case s.MaxInflightBytes > 0:
		opts = append(opts, carmy.WithMaxInflightBytes(s.MaxInflightBytes))
	case s.MaxInflightBytes < 0:
		opts = append(opts, carmy.WithMaxInflightBytes(0))
	}
	if fc.Limits.MaxRunning > 0 {
		opts = append(opts, carmy.WithMaxRunning(fc.Limits.MaxRunning))
	}
	if lim.runningShare > 0 {
		opts = append(opts, carmy.WithMaxRunningPerPrincipal(lim.runningShare))
	}
	app := carmy.App(opts...)
	if s.Dev || fc.DemoTools {
		if err := app.AddDemoTools(); err != nil {
			return nil, err
		}
	}
	specs, err := fc.toolSpecsLogging(s.Getenv, s.Logger)
	if err != nil {
		return nil, err
	}
	for _, spec := range specs {
		if err := app.AddTool(spec); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	return app, nil
}

// apiConfig is the API's configuration: auth and limits from the config
// file, access, pprof. The caller adds TLS; StartNode adds the cluster's
// administration and peer (node-to-node) endpoints.
func apiConfig(s Settings, fc FileConfig, auth api.Auth) api.Config {
	apiCfg := api.Config{
		Auth: auth, BodyLimit: fc.Limits.BodyBytes, Timeouts: fc.Limits.timeouts(), Logger: s.Logger,
		RateLimit:    api.RateLimit{PerSecond: fc.Limits.RatePerPrincipal, Burst: fc.Limits.RateBurst},
		AuthFailures: fc.Limits.authFailures(),
		Pprof:        s.Pprof,
	}
	acc := resolveAccess(s, fc)
	apiCfg.AllowedHosts, apiCfg.OwnHosts, apiCfg.TrustedProxies, apiCfg.PublicURL = acc.allowedHosts, acc.ownHosts, acc.trustedProxies, acc.publicURL
	return apiCfg
}
