package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's hclog output into slog.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

// newHCLog returns an hclog.Logger writing to l.
func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l.With(slog.String("component", name)), name: name}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	for i, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				args[i] = fmt.Sprintf(format, f[1:]...)
			}
		}
	}
	lv := slogLevel(level)
	if level == hclog.Warn && isFirstElection(msg, args) {
		lv = slog.LevelInfo
	}
	h.l.Log(context.Background(), lv, msg, args...)
}

// isFirstElection reports whether msg is Raft's warning that it starts an
// election while it has never known a leader: what every new node and
// every restart does, not something for an operator to look at. Losing a
// known leader (last-leader-id set) stays a warning.
func isFirstElection(msg string, args []any) bool {
	if msg != "heartbeat timeout reached, starting election" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == ""
		}
	}
	return false
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(l slog.Level) bool { return h.l.Enabled(context.Background(), l) }
func (h *hclogAdapter) IsTrace() bool             { return false }
func (h *hclogAdapter) IsDebug() bool             { return h.enabled(slog.LevelDebug) }
func (h *hclogAdapter) IsInfo() bool              { return h.enabled(slog.LevelInfo) }
func (h *hclogAdapter) IsWarn() bool              { return h.enabled(slog.LevelWarn) }
func (h *hclogAdapter) IsError() bool             { return h.enabled(slog.LevelError) }
func (h *hclogAdapter) ImpliedArgs() []any        { return h.args }
func (h *hclogAdapter) Name() string              { return h.name }
func (h *hclogAdapter) SetLevel(hclog.Level)      {}
func (h *hclogAdapter) GetLevel() hclog.Level     { return hclog.Info }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: h.l.With(args...), name: h.name, args: append(append([]any(nil), h.args...), args...)}
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	return &hclogAdapter{l: h.l.With(slog.String("sub", name)), name: h.name + "." + name, args: h.args}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l, name: name, args: h.args}
}

func (h *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.l.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// memberlistLogger returns a *log.Logger for memberlist, whose lines start
// with "[LEVEL] ".
func memberlistLogger(l *slog.Logger) *log.Logger {
	ml := l.With(slog.String("component", "memberlist"))
	return log.New(writerFunc(func(p []byte) (int, error) {
		msg := string(p)
		level := slog.LevelInfo
		for prefix, lv := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError} {
			if i := strings.Index(msg, prefix); i >= 0 {
				msg, level = msg[i+len(prefix):], lv
				break
			}
		}
		if len(msg) > 0 && msg[len(msg)-1] == '\n' {
			msg = msg[:len(msg)-1]
		}
		ml.Log(context.Background(), level, msg)
		return len(p), nil
	}), "", 0)
}
