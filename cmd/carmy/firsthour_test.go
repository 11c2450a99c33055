package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/embed"
)

// The first hour: a slip in the command line or the config file gets an
// error that says where it is and what was meant.

func TestKeygenHelpExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := keygen([]string{"--help"}, strings.NewReader(strings.Repeat("k", 64)), &out, &errOut); err != nil {
		t.Fatalf("keygen --help: %v", err)
	}
	if !strings.HasPrefix(out.String(), "Usage: carmy keygen") || errOut.Len() != 0 {
		t.Fatalf("keygen --help printed %q to stdout and %q to stderr; want the usage on stdout", out.String(), errOut.String())
	}
	if err := keygen([]string{"--bogus"}, strings.NewReader(""), &out, &errOut); err != errUsage {
		t.Fatalf("keygen --bogus: %v, want errUsage", err)
	}
}

func TestListenAddressesAreCheckedFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, tt := range []struct{ flag, value, want string }{
		{"--http-addr", "40085", `want host:port, such as 127.0.0.1:40085`},
		{"--raft-addr", "localhost", `want host:port`},
		{"--gossip-addr", "127.0.0.1:http", `the port "http" is not a number`},
	} {
		_, err := parseServe([]string{"--dev", "--data-dir", dir, tt.flag, tt.value}, func(string) string { return "" }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.flag) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: %v; want an error naming the flag and saying %q", tt.flag, tt.value, err, tt.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data dir exists after a refused address (%v): nothing may be written before the flags are checked", err)
	}
	for _, ok := range []string{"127.0.0.1:0", ":8080", "[::1]:8080", "node1.internal:8080"} {
		if err := checkListenAddr("http-addr", ok); err != nil {
			t.Errorf("checkListenAddr(%q) = %v, want nil", ok, err)
		}
	}
}

func TestConfigErrorsSayWhere(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"indentation on line 5", "tools:\n  - name: a\n    http:\n      url: http://127.0.0.1:9/x\n   - name: b\n",
			"line 5: did not find expected '-' indicator (check that line's indentation"},
		{"an unknown key", "demo_tool: true\n", `line 1: unknown key "demo_tool" (did you mean "demo_tools"?)`},
		{"a nested unknown key", "limits:\n  max_runing: 3\n", `line 2: unknown key "max_runing" (did you mean "max_running"?)`},
		{"an unknown key like none", "zzzzzzzzzz: 1\n", `line 1: unknown key "zzzzzzzzzz"; docs/config.md lists every key`},
		{"a bad bool", "demo_tools: maybe\n", `line 1: demo_tools: "maybe" is not valid here: want true or false`},
		{"a quoted bool, nested", "tools:\n  - name: a\n    http:\n      url: http://127.0.0.1:9/x\n      follow_redirects: \"true\"\n",
			`line 5: follow_redirects: "true" is not valid here: want true or false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "carmy.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := embed.LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfig: %v; want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "FileConfig") {
				t.Fatalf("LoadConfig: %v names a Go type", err)
			}
		})
	}
}

// TestHelpExitsZero: --help (and -h) on every command and subcommand
// prints its usage to standard output, nothing to standard error, and
// succeeds.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"help", "serve"}, {"serve", "--help"}, {"serve", "-h"},
		{"cluster", "--help"}, {"cluster", "status", "--help"}, {"cluster", "join", "--help"}, {"cluster", "remove", "-h"},
		{"health", "--help"}, {"keygen", "--help"}, {"tls", "--help"}, {"tls", "ca", "--help"}, {"tls", "cert", "--help"},
		{"bench", "--help"}, {"traces", "--help"}, {"traces", "-h"}, {"version"},
	} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, &out, &errOut); err != nil {
			t.Errorf("carmy %s: %v", strings.Join(args, " "), err)
		}
		if out.Len() == 0 || errOut.Len() != 0 {
			t.Errorf("carmy %s printed %d bytes to stdout and %q to stderr; want the usage on stdout alone", strings.Join(args, " "), out.Len(), errOut.String())
		}
	}
}

// TestServeHelpExampleBindsNoWildcard: the usage's examples bind no
// wildcard address, which docs/operations.md advises against.
func TestServeHelpExampleBindsNoWildcard(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"serve", "--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	_, examples, _ := strings.Cut(out.String(), "Examples:")
	if examples == "" || strings.Contains(examples, "--http-addr 0.0.0.0") || strings.Contains(examples, "--http-addr :") {
		t.Errorf("serve --help's examples bind a wildcard address:\n%s", examples)
	}
}

// TestHelpOfEachCommand: `carmy help X` prints X's own help and exits 0;
// `carmy X --help` too, version included; an unknown X is a usage error.
func TestHelpOfEachCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "keygen"}, "Usage: carmy keygen"},
		{[]string{"help", "version"}, "Usage: carmy version"},
		{[]string{"help", "cluster"}, "Usage: carmy cluster"},
		{[]string{"help", "health"}, "Usage: carmy health"},
		{[]string{"help", "tls"}, "Usage: carmy tls"},
		{[]string{"help", "bench"}, "Usage: carmy bench"},
		{[]string{"help", "traces"}, "Usage: carmy traces"},
		{[]string{"help", "help"}, "Usage: carmy help"},
		{[]string{"help", "serve"}, "Usage: carmy serve"},
		{[]string{"version", "--help"}, "Usage: carmy version"},
		{[]string{"version", "-h"}, "Usage: carmy version"},
	} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), tt.args, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), tt.want) || errOut.Len() != 0 {
			t.Errorf("carmy %s: %v, stdout %q, stderr %q; want %q on stdout", strings.Join(tt.args, " "), err, firstLine(out.String()), errOut.String(), tt.want)
		}
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"help", "nosuch"}, &out, &errOut); err != errUsage || out.Len() != 0 ||
		!strings.Contains(errOut.String(), `unknown command "nosuch"`) {
		t.Errorf("carmy help nosuch: %v, stdout %q, stderr %q; want a usage error naming the command", err, out.String(), firstLine(errOut.String()))
	}
	out.Reset()
	if err := run(t.Context(), []string{"version"}, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "carmy ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("carmy version: %v, %q; want carmy <version> (commit …, <go version>)", err, out.String())
	}
}

// TestMistypedFlagSaysWhatWasMeant: a wrong flag gets one line naming it
// and the nearest flag, and a pointer to the help, not the whole usage.
func TestMistypedFlagSaysWhatWasMeant(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		want, help string
	}{
		{[]string{"serve", "--http-adr", "127.0.0.1:0"}, "unknown flag --http-adr (did you mean --http-addr?)", "carmy serve --help"},
		{[]string{"cluster", "status", "--adr", "x"}, "unknown flag --adr (did you mean --addr?)", "carmy cluster --help"},
		{[]string{"bench", "--client", "3"}, "unknown flag --client (did you mean --clients?)", "carmy bench --help"},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), tt.args, &out, &errOut)
		msg := errOut.String()
		if err != errUsage || !strings.Contains(msg, tt.want) || !strings.Contains(msg, tt.help) {
			t.Errorf("carmy %s: %v, stderr %q; want %q and a pointer to %q", strings.Join(tt.args, " "), err, msg, tt.want, tt.help)
		}
		if n := strings.Count(msg, "\n"); n > 4 || strings.Contains(msg, "provided but not defined") {
			t.Errorf("carmy %s printed %d lines: want the problem and a pointer, not the usage:\n%s", strings.Join(tt.args, " "), n, msg)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// TestNoPreviousExecutions: a node takes calls at once only when no
// earlier process can have run executions under its id.
func TestNoPreviousExecutions(t *testing.T) {
	empty := t.TempDir()
	withID := t.TempDir()
	if err := os.WriteFile(filepath.Join(withID, nodeIDFile), []byte("node-0000abcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withRaft := t.TempDir()
	if err := os.WriteFile(filepath.Join(withRaft, "raft.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  serveConfig
		want bool
	}{
		{"a generated id", serveConfig{DataDir: empty}, true},
		{"a generated id, on a fleet", serveConfig{DataDir: empty, Store: "postgres://db/carmy"}, true},
		{"founding a cluster", serveConfig{DataDir: empty, NodeID: "n1", Bootstrap: true}, true},
		{"joining with a given id", serveConfig{DataDir: empty, NodeID: "n2"}, false},
		{"a given id on a fleet", serveConfig{DataDir: empty, NodeID: "n1", Bootstrap: true, Store: "postgres://db/carmy"}, false},
		{"an id kept from an earlier start", serveConfig{DataDir: withID}, false},
		{"Raft state", serveConfig{DataDir: withRaft, Bootstrap: true}, false},
	} {
		if got := noPreviousExecutions(tt.cfg); got != tt.want {
			t.Errorf("%s: noPreviousExecutions = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAddressInUseNamesTheFlag: a node whose address is taken says which
// flag names it, and that the address is in use.
func TestAddressInUseNamesTheFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	udp, err := net.ListenPacket("udp", taken.Addr().String()) // gossip binds both
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	addr := taken.Addr().String()
	for _, flag := range []string{"--http-addr", "--raft-addr", "--gossip-addr"} {
		args := []string{"serve", "--dev", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", flag, addr}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := run(ctx, args, &bytes.Buffer{}, &bytes.Buffer{})
		cancel()
		if err == nil || !strings.HasPrefix(err.Error(), flag+" "+addr+": address already in use") {
			t.Errorf("%s on a taken address: %v; want %q first", flag, err, flag+" "+addr+": address already in use")
		}
	}
}
