package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/carmyhq/carmy/mcpgateway"
)

// mcpUpstreams returns the configured upstream MCP servers (SPEC §5.2),
// registering their tools with reg once started, expanding ${VAR} in
// their URLs and headers from getenv (an unset variable is an error). An
// error never repeats a URL or a header's value.
func (fc fileConfig) mcpUpstreams(reg mcpgateway.Registry, getenv func(string) string, log *slog.Logger) ([]*mcpgateway.Upstream, error) {
	var ups []*mcpgateway.Upstream
	seen := make(map[string]bool)
	for i, mc := range fc.MCPServers {
		where := fmt.Sprintf("mcp_servers[%d] (%s)", i, mc.Name)
		if seen[mc.Name] {
			return nil, fmt.Errorf("config %s: the name is used twice", where)
		}
		seen[mc.Name] = true
		for _, tc := range fc.Tools {
			if prefix, _, ok := strings.Cut(tc.Name, "."); ok && prefix == mc.Name {
				return nil, fmt.Errorf("config %s: tool %q of tools: is named under this server's prefix", where, tc.Name)
			}
		}
		cfg := mcpgateway.Config{
			Name: mc.Name, Command: mc.Command, Tools: mc.Tools, RequireRequestID: mc.RequireRequestID, Logger: log,
		}
		if mc.Tools != nil && len(mc.Tools) == 0 {
			return nil, fmt.Errorf("config %s: tools lists no tool: leave it out to serve every tool", where)
		}
		if mc.Timeout != "" {
			d, err := time.ParseDuration(mc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("config %s: timeout %q: want a positive duration such as 30s", where, mc.Timeout)
			}
			cfg.Timeout = d
		}
		var err error
		if cfg.DedupeWindow, err = parseWindow(mc.DedupeWindow); err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		if cfg.URL, err = expand(mc.URL, getenv); err != nil {
			return nil, fmt.Errorf("config %s: url: %w", where, err)
		}
		if mc.Headers != nil {
			cfg.Headers = make(map[string]string, len(mc.Headers))
			for k, v := range mc.Headers {
				if cfg.Headers[k], err = expand(v, getenv); err != nil {
					return nil, fmt.Errorf("config %s: header %s: %w", where, k, err)
				}
			}
		}
		if mc.AllowNetworks != nil || mc.URL != "" {
			if cfg.AllowNetworks, err = fc.networksWithin(where+": allow_networks", mc.AllowNetworks); err != nil {
				return nil, fmt.Errorf("config %w", err)
			}
		}
		u, err := mcpgateway.New(reg, cfg)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		ups = append(ups, u)
	}
	return ups, nil
}

// startUpstreams starts the upstream MCP servers, which connect in the
// background; the function it returns closes them (stopping stdio
// children), for after the runtime has drained.
func startUpstreams(ctx context.Context, ups []*mcpgateway.Upstream) (func(), error) {
	closeAll := func() {
		for _, u := range ups {
			u.Close()
		}
	}
	for _, u := range ups {
		if err := u.Start(context.WithoutCancel(ctx)); err != nil {
			closeAll()
			return nil, fmt.Errorf("mcp server %q: %w", u.Name(), err)
		}
	}
	return closeAll, nil
}
