package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
)

// serve runs `carmy serve` until ctx is done.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	fc, err := loadConfig(cfg.ConfigPath)
	if err != nil {
		return err
	}
	var auth api.Auth
	if cfg.Dev {
		log.Warn("dev mode: demo tools on, auth off; do not expose this node")
	} else if auth, err = fc.auth(os.Getenv); err != nil {
		return err
	}
	if !auth.Enabled() && !cfg.Dev && !carmy.IsLoopback(cfg.HTTPAddr) {
		return fmt.Errorf("refusing to start: --http-addr %s is not a loopback address and no auth tokens are configured "+
			"(add auth.tokens to the config file, bind to 127.0.0.1, or use --dev to try it out)", cfg.HTTPAddr)
	}

	opts := []carmy.Option{carmy.WithNodeID(cfg.NodeID), carmy.WithLogger(log)}
	if fc.Limits.ResultBytes > 0 {
		opts = append(opts, carmy.WithMaxResultBytes(fc.Limits.ResultBytes))
	}
	app := carmy.App(opts...)
	app.IdempotencyStore(store.NewMemory(cfg.MaxEntries))
	if cfg.Dev || fc.DemoTools {
		if err := app.AddDemoTools(); err != nil {
			return err
		}
	}
	specs, err := fc.toolSpecs(os.Getenv)
	if err != nil {
		return err
	}
	for _, spec := range specs {
		if err := app.AddTool(spec); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	log.Info("starting carmy", slog.String("version", version), slog.String("node_id", cfg.NodeID),
		slog.Int("tools", len(app.Tools())), slog.Bool("auth", auth.Enabled()), slog.Int("max_entries", cfg.MaxEntries))
	apiCfg := api.Config{Auth: auth, BodyLimit: fc.Limits.BodyBytes, Logger: log}
	// Listen here rather than through app.ListenAndServe, which refuses a
	// non-loopback address without tokens even with --dev (checked above).
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	defer ln.Close()
	if err := app.Serve(ctx, ln, apiCfg); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
