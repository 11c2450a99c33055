package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTracesRefusesBadCommandLines(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--jaegr", "x.json"}, "unknown flag --jaegr (did you mean --jaeger?)"},
		{[]string{"--listen", "0.0.0.0:4318"}, "not a loopback address"},
		{[]string{"--listen", ":4318"}, "not a loopback address"},
		{[]string{"--listen", "4318"}, "want host:port"},
		{[]string{"--settle", "0s"}, "positive duration"},
		{[]string{"--max-traces", "0"}, "at least 1"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"traces"}, tt.args...), &out, &errOut)
		if err != errUsage || out.Len() != 0 || !strings.Contains(errOut.String(), tt.want) || !strings.Contains(errOut.String(), "Usage: carmy traces") {
			t.Errorf("carmy traces %s: %v, stdout %q, stderr %q; want a usage error saying %q", strings.Join(tt.args, " "), err, out.String(), firstLine(errOut.String()), tt.want)
		}
	}
}

// TestTracesStopsWithItsContext: a receiver on a free loopback port
// prints where it listens and the line to start a node with, and returns
// nil once its context ends (SIGINT or SIGTERM in the binary).
func TestTracesStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"traces", "--listen", "127.0.0.1:0"}, &out, &errOut); err != nil {
		t.Fatalf("carmy traces: %v (stderr %q)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:") || !strings.Contains(errOut.String(), "stopped; 0 traces") {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// TestTracesFailsAtOnceOnAnUnwritableJaegerFile: --jaeger in a folder
// that does not exist is an error before anything is received.
func TestTracesFailsAtOnceOnAnUnwritableJaegerFile(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"traces", "--listen", "127.0.0.1:0", "--jaeger", filepath.Join(t.TempDir(), "nosuch", "t.json")}, &out, &errOut)
	if err == nil || err == errUsage || !strings.Contains(err.Error(), "--jaeger") {
		t.Errorf("carmy traces --jaeger nosuch/t.json: %v, want an error naming --jaeger", err)
	}
}

// TestTracesWritesAnEmptyJaegerFileAtStart: the file is there, valid,
// before any trace arrives.
func TestTracesWritesAnEmptyJaegerFileAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"traces", "--listen", "127.0.0.1:0", "--jaeger", path}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(raw), `"data": []`) {
		t.Errorf("%s: %q, %v; want a Jaeger document without traces", path, raw, err)
	}
}

// TestTracesSaysWhenItsPortIsTaken: a port another receiver holds is an
// error that says what to do, and leaves the --jaeger file alone.
func TestTracesSaysWhenItsPortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = run(t.Context(), []string{"traces", "--listen", ln.Addr().String(), "--jaeger", path}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "give --listen another port") {
		t.Errorf("carmy traces on a taken port: %v, want an error saying to give another port", err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != "kept" {
		t.Errorf("the --jaeger file holds %q, want it untouched", raw)
	}
}
