package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// flushBudget bounds the flush of the spans not yet exported once the
// node has stopped, within carmy serve's stopBudget's margin.
const flushBudget = time.Second

// startTracing turns tracing on when the OTEL_* environment asks for it
// (docs/tracing.md), and returns what flushes the spans not yet sent,
// to call once the node has stopped.
func startTracing(ctx context.Context, nodeID string, log *slog.Logger) (flush func(), err error) {
	shutdown, err := otlp.Setup(ctx, os.Getenv, nodeID, log)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushBudget)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("tracing: spans lost at shutdown", slog.Any("err", err))
		}
	}, nil
}
