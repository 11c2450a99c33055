package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// loadConfigAndAuth reads the config file and its auth section (none with
// --dev), and refuses anonymous callers unless every listener is on
// loopback.
func loadConfigAndAuth(cfg serveConfig, log *slog.Logger) (fileConfig, api.Auth, error) {
	fc, err := loadConfig(cfg.ConfigPath)
	if err != nil {
		return fileConfig{}, api.Auth{}, err
	}
	var auth api.Auth
	if cfg.Dev {
		log.Warn("dev mode: demo tools on, auth off; do not expose this node")
	} else if auth, err = fc.auth(os.Getenv); err != nil {
		return fileConfig{}, api.Auth{}, err
	}
	if o := auth.OAuth; o != nil {
		log.Info("accepting OAuth access tokens", slog.String("issuer", o.Issuer), slog.String("audience", o.Audience), slog.String("jwks_url", o.JWKSURL))
	}
	if !auth.Enabled() && !cfg.Dev {
		// Anonymous callers only when every listener is on loopback.
		for _, l := range []struct{ flag, addr string }{
			{"--http-addr", cfg.HTTPAddr}, {"--raft-addr", cfg.RaftAddr}, {"--gossip-addr", cfg.GossipAddr},
		} {
			if !carmy.IsLoopback(l.addr) {
				return fileConfig{}, api.Auth{}, fmt.Errorf("refusing to start: %s %s is not a loopback address and no auth tokens are configured "+
					"(add auth.tokens to the config file, bind to 127.0.0.1, or use --dev to try it out)", l.flag, l.addr)
			}
		}
	}
	return fc, auth, nil
}

// buildRuntime returns the runtime with the limits of the config file and
// its tools: the demo tools with --dev or demo_tools, and the HTTP tools
// it declares.
func buildRuntime(cfg serveConfig, fc fileConfig, lim limits, log *slog.Logger) (*carmy.Runtime, error) {
	opts := []carmy.Option{carmy.WithNodeID(cfg.NodeID), carmy.WithLogger(log)}
	if cfg.fresh {
		opts = append(opts, carmy.WithNoPreviousExecutions())
	}
	if fc.Limits.ResultBytes > 0 {
		opts = append(opts, carmy.WithMaxResultBytes(fc.Limits.ResultBytes))
	}
	switch {
	case cfg.MaxInflightBytes > 0:
		opts = append(opts, carmy.WithMaxInflightBytes(cfg.MaxInflightBytes))
	case cfg.MaxInflightBytes < 0:
		opts = append(opts, carmy.WithMaxInflightBytes(0))
	}
	if fc.Limits.MaxRunning > 0 {
		opts = append(opts, carmy.WithMaxRunning(fc.Limits.MaxRunning))
	}
	if lim.runningShare > 0 {
		opts = append(opts, carmy.WithMaxRunningPerPrincipal(lim.runningShare))
	}
	app := carmy.App(opts...)
	if cfg.Dev || fc.DemoTools {
		if err := app.AddDemoTools(); err != nil {
			return nil, err
		}
	}
	specs, err := fc.toolSpecsLogging(os.Getenv, log)
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
// file, TLS (apiKeys, nil for plain HTTP), access. StartNode adds the
// cluster's administration and internal endpoints.
func apiConfig(cfg serveConfig, fc fileConfig, auth api.Auth, apiKeys *tlsmux.KeyPair, log *slog.Logger) api.Config {
	apiCfg := api.Config{
		Auth: auth, BodyLimit: fc.Limits.BodyBytes, Timeouts: fc.Limits.timeouts(), Logger: log,
		RateLimit:    api.RateLimit{PerSecond: fc.Limits.RatePerPrincipal, Burst: fc.Limits.RateBurst},
		AuthFailures: fc.Limits.authFailures(),
		Pprof:        cfg.Pprof,
	}
	if apiKeys != nil {
		apiCfg.TLS = apiKeys.ServerConfig()
	}
	acc := resolveAccess(cfg, fc)
	apiCfg.AllowedHosts, apiCfg.OwnHosts, apiCfg.TrustedProxies, apiCfg.PublicURL = acc.allowedHosts, acc.ownHosts, acc.trustedProxies, acc.publicURL
	return apiCfg
}

// warnPlainAPI warns of a plain-HTTP API off loopback outside --dev.
func warnPlainAPI(cfg serveConfig, apiKeys *tlsmux.KeyPair, log *slog.Logger) {
	if apiKeys == nil && !cfg.Dev && !carmy.IsLoopback(cfg.HTTPAddr) {
		log.Warn("the API is plain HTTP off loopback: tokens and results cross the network in the clear; give --tls-cert and --tls-key",
			slog.String("http_addr", cfg.HTTPAddr))
	}
}
