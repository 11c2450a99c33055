//go:build !carmyfaults

package main

import (
	"log/slog"

	"github.com/carmyhq/carmy/internal/faultnet"
)

// newFaults returns nil: the default build has no test fault layer, and
// nothing turns one on (build with -tags carmyfaults for that).
func newFaults(func(string) string, *slog.Logger) *faultnet.Filter { return nil }
