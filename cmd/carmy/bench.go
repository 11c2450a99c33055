package main

import (
	"context"
	"errors"
	"io"

	"github.com/carmyhq/carmy/internal/bench"
)

// benchCmd runs `carmy bench args…` (internal/bench), reading its defaults
// through getenv; its usage errors are errUsage (exit status 2).
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := bench.Run(ctx, args, bench.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Version: version})
	if errors.Is(err, bench.ErrUsage) {
		return errUsage
	}
	return err
}
