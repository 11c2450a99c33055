package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
)

// fakeEnv returns a getenv that reads m only, so tests never depend on the
// environment they run in.
func fakeEnv(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// clearCarmyEnv empties every CARMY_* variable for the test, for the code
// paths that read the real environment (serve, run).
func clearCarmyEnv(t *testing.T) {
	t.Helper()
	for _, fe := range flagEnv {
		t.Setenv(fe.env, "")
	}
}

func TestParseServeDefaults(t *testing.T) {
	var out bytes.Buffer
	cfg, err := parseServe(nil, fakeEnv(nil), &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	want := serveConfig{
		NodeID:     "node1",
		HTTPAddr:   "127.0.0.1:8080",
		MaxEntries: 100000,
		LogFormat:  "text",
		LogLevel:   "info",
	}
	if cfg != want {
		t.Errorf("defaults = %+v, want %+v", cfg, want)
	}
	if out.Len() != 0 {
		t.Errorf("parseServe printed %q on success", out.String())
	}
}

func TestParseServeEnvironment(t *testing.T) {
	tests := []struct {
		env, value string
		check      func(serveConfig) bool
	}{
		{"CARMY_NODE_ID", "node7", func(c serveConfig) bool { return c.NodeID == "node7" }},
		{"CARMY_HTTP_ADDR", "127.0.0.1:9999", func(c serveConfig) bool { return c.HTTPAddr == "127.0.0.1:9999" }},
		{"CARMY_CONFIG", "/etc/carmy/carmy.yaml", func(c serveConfig) bool { return c.ConfigPath == "/etc/carmy/carmy.yaml" }},
		{"CARMY_MAX_ENTRIES", "42", func(c serveConfig) bool { return c.MaxEntries == 42 }},
		{"CARMY_LOG_FORMAT", "json", func(c serveConfig) bool { return c.LogFormat == "json" }},
		{"CARMY_LOG_LEVEL", "debug", func(c serveConfig) bool { return c.LogLevel == "debug" }},
	}
	if len(tests) != len(flagEnv) {
		t.Fatalf("the table covers %d variables, flagEnv has %d: add the new ones", len(tests), len(flagEnv))
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			var out bytes.Buffer
			cfg, err := parseServe(nil, fakeEnv(map[string]string{tt.env: tt.value}), &out)
			if err != nil {
				t.Fatalf("parseServe with %s=%s: %v", tt.env, tt.value, err)
			}
			if !tt.check(cfg) {
				t.Errorf("%s=%s gave %+v", tt.env, tt.value, cfg)
			}
		})
	}
}

func TestParseServeFlagBeatsEnvironment(t *testing.T) {
	env := fakeEnv(map[string]string{
		"CARMY_NODE_ID":     "from-env",
		"CARMY_HTTP_ADDR":   "127.0.0.1:1111",
		"CARMY_MAX_ENTRIES": "5",
		"CARMY_LOG_FORMAT":  "json",
		"CARMY_LOG_LEVEL":   "debug",
	})
	args := []string{"--node-id", "from-flag", "--http-addr=127.0.0.1:2222", "--max-entries", "7", "--log-format", "text"}
	var out bytes.Buffer
	cfg, err := parseServe(args, env, &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	want := serveConfig{NodeID: "from-flag", HTTPAddr: "127.0.0.1:2222", MaxEntries: 7, LogFormat: "text", LogLevel: "debug"}
	if cfg != want {
		t.Errorf("parseServe = %+v, want %+v (flags win, the environment fills the rest)", cfg, want)
	}
}

func TestParseServeFlagOverridesInvalidEnvironmentValue(t *testing.T) {
	// An invalid value in the environment is checked only after the command
	// line had its say: validation looks at the final configuration.
	env := fakeEnv(map[string]string{"CARMY_LOG_FORMAT": "xml"})
	var out bytes.Buffer
	cfg, err := parseServe([]string{"--log-format", "json"}, env, &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if cfg.LogFormat != "json" {
		t.Errorf("LogFormat = %q, want json", cfg.LogFormat)
	}
}

func TestParseServeInvalidEnvironment(t *testing.T) {
	for _, tt := range []struct{ env, value string }{
		{"CARMY_MAX_ENTRIES", "abc"},
		{"CARMY_MAX_ENTRIES", "1e3"},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(nil, fakeEnv(map[string]string{tt.env: tt.value}), &out)
			if err == nil {
				t.Fatalf("parseServe with %s=%s: no error", tt.env, tt.value)
			}
			if errors.Is(err, errUsage) {
				t.Errorf("err = %v: a bad environment value is not a command-line usage error", err)
			}
			if !strings.Contains(err.Error(), tt.env) {
				t.Errorf("err = %q, want it to name %s", err, tt.env)
			}
		})
	}
}

func TestParseServeInvalidValues(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		mention string
	}{
		{"max-entries zero", []string{"--max-entries", "0"}, nil, "--max-entries"},
		{"max-entries negative", []string{"--max-entries=-3"}, nil, "--max-entries"},
		{"max-entries zero from env", nil, map[string]string{"CARMY_MAX_ENTRIES": "0"}, "max-entries"},
		{"log-format xml", []string{"--log-format", "xml"}, nil, "--log-format"},
		{"log-level loud", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"node-id with a space", []string{"--node-id", "a b"}, nil, "--node-id"},
		{"node-id with a slash", []string{"--node-id", "a/b"}, nil, "--node-id"},
		{"node-id empty", []string{"--node-id", ""}, nil, "--node-id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(tt.args, fakeEnv(tt.env), &out)
			if err == nil {
				t.Fatalf("parseServe(%q): no error", tt.args)
			}
			if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
				t.Errorf("err = %v, want a validation error", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %q, want it to mention %s", err, tt.mention)
			}
		})
	}
}

func TestParseServeUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"positional argument", []string{"extra"}, `"extra"`},
		{"positional argument after flags", []string{"--dev", "now"}, `"now"`},
		{"unknown flag", []string{"--no-such-flag"}, "no-such-flag"},
		{"flag without its value", []string{"--node-id"}, "node-id"},
		{"non-numeric max-entries", []string{"--max-entries", "many"}, "max-entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(tt.args, fakeEnv(nil), &out)
			if !errors.Is(err, errUsage) {
				t.Fatalf("parseServe(%q) = %v, want errUsage", tt.args, err)
			}
			if !strings.Contains(out.String(), tt.mention) {
				t.Errorf("output %q does not mention %s", out.String(), tt.mention)
			}
		})
	}
}

func TestParseServeHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe([]string{arg}, fakeEnv(nil), &out)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("parseServe(%s) = %v, want flag.ErrHelp", arg, err)
			}
			checkServeUsage(t, out.String())
		})
	}
}

// checkServeUsage checks that text documents every flag of carmy serve and
// the environment variable of each.
func checkServeUsage(t *testing.T, text string) {
	t.Helper()
	var cfg serveConfig
	n := 0
	serveFlags(&cfg, &bytes.Buffer{}).VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(text, "--"+f.Name) {
			t.Errorf("usage does not mention --%s:\n%s", f.Name, text)
		}
	})
	if n < len(flagEnv)+1 { // every flag with a variable, and --dev
		t.Errorf("serve has %d flags, want at least %d", n, len(flagEnv)+1)
	}
	for _, fe := range flagEnv {
		if !strings.Contains(text, "$"+fe.env) {
			t.Errorf("usage does not mention $%s (of --%s):\n%s", fe.env, fe.flag, text)
		}
	}
	for _, s := range []string{"Usage: carmy serve", "--dev", "(default node1)", "(default 127.0.0.1:8080)", "(default 100000)"} {
		if !strings.Contains(text, s) {
			t.Errorf("usage does not contain %q:\n%s", s, text)
		}
	}
}

func TestFlagEnvNamesExistingFlags(t *testing.T) {
	var cfg serveConfig
	fs := serveFlags(&cfg, &bytes.Buffer{})
	seen := make(map[string]bool)
	for _, fe := range flagEnv {
		if fs.Lookup(fe.flag) == nil {
			t.Errorf("flagEnv names --%s, which is not a flag", fe.flag)
		}
		if !strings.HasPrefix(fe.env, "CARMY_") {
			t.Errorf("--%s: variable %s does not start with CARMY_", fe.flag, fe.env)
		}
		if seen[fe.env] {
			t.Errorf("variable %s is used twice", fe.env)
		}
		seen[fe.env] = true
	}
	if fs.Lookup("dev") == nil {
		t.Error("no --dev flag")
	}
	if envOf("dev") != "" {
		t.Errorf("--dev has variable %s; SPEC §3 gives it none", envOf("dev"))
	}
}

func TestNewLoggerFormats(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		log := newLogger(serveConfig{LogFormat: "json", LogLevel: "info"}, &buf)
		log.Info("hello", "k", "v")
		log.Debug("hidden")
		var line map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", buf.String(), err)
		}
		if line["msg"] != "hello" || line["k"] != "v" {
			t.Errorf("line = %v", line)
		}
	})
	t.Run("text with debug", func(t *testing.T) {
		var buf bytes.Buffer
		log := newLogger(serveConfig{LogFormat: "text", LogLevel: "debug"}, &buf)
		log.Debug("shown", "k", "v")
		if got := buf.String(); !strings.Contains(got, `msg=shown`) || !strings.Contains(got, "k=v") {
			t.Errorf("text log = %q", got)
		}
	})
	t.Run("warn hides info", func(t *testing.T) {
		var buf bytes.Buffer
		log := newLogger(serveConfig{LogFormat: "text", LogLevel: "warn"}, &buf)
		log.Info("hidden")
		if buf.Len() != 0 {
			t.Errorf("info logged at level warn: %q", buf.String())
		}
	})
}

func TestRunVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), []string{arg}, &stdout, &stderr); err != nil {
				t.Fatalf("run(%s): %v", arg, err)
			}
			if got, want := stdout.String(), "carmy "+version+"\n"; got != want {
				t.Errorf("stdout = %q, want %q", got, want)
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", stderr.String())
			}
		})
	}
}

func TestRunNoArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), nil, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run() = %v, want errUsage", err)
	}
	if !strings.Contains(stderr.String(), "Usage:") || !strings.Contains(stderr.String(), "carmy serve") {
		t.Errorf("stderr = %q, want the usage", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestRunUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"frobnicate"}, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run(frobnicate) = %v, want errUsage", err)
	}
	if got := stderr.String(); !strings.Contains(got, `unknown command "frobnicate"`) || !strings.Contains(got, "Usage:") {
		t.Errorf("stderr = %q, want the unknown command and the usage", got)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("run(%q): %v", args, err)
			}
			if !strings.Contains(stdout.String(), "Usage:") || !strings.Contains(stdout.String(), "carmy help serve") {
				t.Errorf("stdout = %q, want the usage", stdout.String())
			}
		})
	}
}

func TestRunHelpServe(t *testing.T) {
	clearCarmyEnv(t)
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"help", "serve"}, &stdout, &stderr); err != nil {
		t.Fatalf("run(help serve): %v", err)
	}
	// Where the flags go (stdout or stderr) is not part of the contract;
	// that they are all there is.
	checkServeUsage(t, stdout.String()+stderr.String())
}

func TestRunServeBadFlagIsUsage(t *testing.T) {
	clearCarmyEnv(t)
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--bogus"}, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run(serve --bogus) = %v, want errUsage", err)
	}
	if !strings.Contains(stderr.String(), "bogus") {
		t.Errorf("stderr = %q, want it to name the flag", stderr.String())
	}
}
