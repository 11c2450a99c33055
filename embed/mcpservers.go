package embed

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carmyhq/carmy/mcpgateway"
)

// mcpUpstreams returns the configured upstream MCP servers (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway),
// registering their tools with reg once started, expanding ${VAR} in
// their URLs, headers and env from getenv (an unset variable is an
// error), bounding their answers by limits.result_bytes. A command
// without dir runs in <dataDir>/mcp/<name>, created here (with dataDir
// empty, in the node's working directory). An error never repeats a URL,
// a header's value or an env value.
func (fc FileConfig) mcpUpstreams(reg mcpgateway.Registry, getenv func(string) string, dataDir string, log *slog.Logger) ([]*mcpgateway.Upstream, error) {
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
			Name: mc.Name, Command: mc.Command, Tools: mc.Tools.list(), RequireRequestID: mc.RequireRequestID, Logger: log,
			TrustAnnotations: mc.TrustAnnotations,
			MaxAnswerBytes:   fc.Limits.ResultBytes, // 0: the runtime's default, as the gateway's
		}
		if cfg.Tools != nil && len(cfg.Tools) == 0 {
			return nil, fmt.Errorf("config %s: tools lists no tool: leave it out to serve every tool", where)
		}
		allow, err := fc.networksWithin(where+": allow_networks", mc.AllowNetworks)
		if err != nil {
			return nil, fmt.Errorf("config %w", err)
		}
		if cfg.Approval, err = mc.Tools.approvals(getenv, allow); err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		if cfg.Effects, cfg.RetryUncertain, err = mc.Tools.effects(); err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
		}
		if mc.Timeout != "" {
			d, err := time.ParseDuration(mc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("config %s: timeout %q: want a positive duration such as 30s", where, mc.Timeout)
			}
			cfg.Timeout = d
		}
		cfg.ReconcileTool = mc.ReconcileTool
		if mc.ReconcileGiveUpAfter != "" {
			d, err := time.ParseDuration(mc.ReconcileGiveUpAfter)
			if err != nil || d <= 0 || mc.ReconcileTool == "" {
				return nil, fmt.Errorf("config %s: reconcile_give_up_after %q: want a positive duration such as 24h, with reconcile_tool", where, mc.ReconcileGiveUpAfter)
			}
			cfg.ReconcileGiveUp = d
		}
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
		if mc.CancelGrace != "" {
			d, err := time.ParseDuration(mc.CancelGrace)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("config %s: cancel_grace %q: want a positive duration such as 5s", where, mc.CancelGrace)
			}
			cfg.CancelGrace = d
		}
		if mc.Env != nil {
			cfg.Env = make(map[string]string, len(mc.Env))
			for k, v := range mc.Env {
				if cfg.Env[k], err = expand(v, getenv); err != nil {
					return nil, fmt.Errorf("config %s: env %s: %w", where, k, err)
				}
			}
		}
		if cfg.Dir, err = childDir(mc, dataDir); err != nil {
			return nil, fmt.Errorf("config %s: %w", where, err)
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

// childDir returns the working directory of a command's child: dir as
// configured, else <dataDir>/mcp/<name>, created 0700 (none for a url, or
// with dataDir empty).
func childDir(mc MCPServerConfig, dataDir string) (string, error) {
	if mc.Dir != "" || len(mc.Command) == 0 || dataDir == "" || !mcpgateway.ValidName(mc.Name) {
		return mc.Dir, nil
	}
	dir := filepath.Join(dataDir, "mcp", mc.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the command's directory: %w", err)
	}
	return dir, nil
}
