// Command postgres serves Carmy's HTTP API from the library, with every
// reservation and result kept in PostgreSQL instead of the process's
// memory: a retry is answered from the record after a restart of the
// process, and by any other process that shares the database.
//
//	CARMY_POSTGRES_DSN='host=/var/run/postgresql dbname=carmy' go run ./examples/postgres [-addr host:port]
//
// -addr is where the HTTP API listens (default 127.0.0.1:8080, or
// $CARMY_ADDR); two copies on one machine need two addresses. Without
// tokens it must be a loopback address.
//
// Environment:
//
//	CARMY_POSTGRES_DSN  the database (a libpq connection string or URL); required
//	CARMY_NODE_ID       this process's node id (default: the host name); every
//	                    process sharing the database needs its own
//	CARMY_RETENTION     remove finished records older than this (e.g. 72h);
//	                    default: keep them
//
// See README.md beside this file.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

func main() {
	addr := os.Getenv("CARMY_ADDR")
	if addr == "" {
		addr = carmy.DefaultAddr
	}
	flag.StringVar(&addr, "addr", addr, "the `host:port` of the HTTP API (loopback: there are no tokens)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, addr); err != nil {
		slog.Error("postgres example", slog.Any("err", err))
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	dsn := os.Getenv("CARMY_POSTGRES_DSN")
	if dsn == "" {
		return errors.New("set CARMY_POSTGRES_DSN, e.g. CARMY_POSTGRES_DSN='host=/var/run/postgresql dbname=carmy'")
	}
	nodeID := os.Getenv("CARMY_NODE_ID")
	if nodeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("CARMY_NODE_ID unset and no host name: %w", err)
		}
		nodeID = host
	}
	var retention time.Duration
	if v := os.Getenv("CARMY_RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("CARMY_RETENTION=%q: want a positive duration such as 72h", v)
		}
		retention = d
	}

	// The tables are created (or migrated) here; several processes may
	// start at once.
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := postgres.Open(openCtx, dsn, postgres.Config{})
	cancel()
	if err != nil {
		return err
	}
	defer s.Close()
	if retention > 0 {
		go expire(ctx, s, retention)
	}

	app := carmy.App(carmy.WithNodeID(nodeID))
	app.Tool("create_order", createOrder)
	app.IdempotencyStore(s)
	slog.Info("serving on "+addr, slog.String("node_id", nodeID), slog.String("schema", s.Schema()))
	return app.ListenAndServe(ctx, addr, api.Config{})
}

// createOrder stands for a tool with an effect that must not happen twice:
// it makes up an order id. A retry with the same request_id gets the same
// id back from PostgreSQL, whichever process answers it.
func createOrder(_ context.Context, call carmy.Call) (any, error) {
	var args struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.SKU == "" {
		return nil, errors.New(`want arguments {"sku": "…", "quantity": n}`)
	}
	return map[string]any{
		"order_id": "ord_" + rand.Text()[:10],
		"sku":      args.SKU,
		"quantity": max(args.Quantity, 1),
		"fencing":  call.FencingToken,
	}, nil
}

// expire removes finished records older than retention, hourly: the opt-in
// retention of the binary's --retention. Running and interrupted records
// are never removed.
func expire(ctx context.Context, e store.Expirer, retention time.Duration) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		n, err := e.Expire(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			slog.Warn("expiring finished records", slog.Any("err", err))
		case n > 0:
			slog.Info("expired finished records", slog.Int("count", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
