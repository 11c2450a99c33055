package embed

import (
	"io"
	"log/slog"
)

// discardLogger is a logger that writes nothing.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeEnv is a getenv of the variables in m alone.
func fakeEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}
