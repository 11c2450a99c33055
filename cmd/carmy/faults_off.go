//go:build !carmyfaults

package main

import "log/slog"

// newFaults returns nil: the default build has no test fault layer, and
// nothing turns one on (build with -tags carmyfaults for that).
func newFaults(func(string) string, *slog.Logger) faultLayer { return nil }
