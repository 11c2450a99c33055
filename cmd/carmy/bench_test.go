package main

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/bench"
)

// `carmy bench` is internal/bench behind the dispatcher: these tests check
// the wiring (help and exit status); internal/bench tests the command.

func TestBenchHelp(t *testing.T) {
	for _, args := range [][]string{{"bench", "--help"}, {"bench", "-h"}, {"help", "bench"}} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, &stdout, &stderr); err != nil {
			t.Errorf("carmy %q: %v", args, err)
		}
		if stdout.String() != bench.Usage || stderr.Len() != 0 {
			t.Errorf("carmy %q: stdout %q, stderr %q; want the usage on stdout", args, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	run(t.Context(), []string{"help"}, &stdout, io.Discard)
	if !strings.Contains(stdout.String(), "carmy bench [flags]") {
		t.Errorf("carmy help does not list bench:\n%s", stdout.String())
	}
}

// A usage error of carmy bench exits 2, a run whose every call failed 1.
func TestBenchExitStatus(t *testing.T) {
	var stderr bytes.Buffer
	if code := exitCode(run(t.Context(), []string{"bench", "--clients", "many"}, io.Discard, &stderr), &stderr); code != 2 {
		t.Errorf("carmy bench --clients many: exit status %d, want 2", code)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	stderr.Reset()
	err = benchCmd(t.Context(), []string{"--targets", closed, "--calls", "4", "--clients", "1", "--quiet"}, fakeEnv(nil), io.Discard, &stderr)
	if code := exitCode(err, &stderr); code != 1 || !strings.Contains(stderr.String(), "every call failed") {
		t.Errorf("carmy bench against a closed port: exit status %d, stderr %q; want 1 and every call failed", code, stderr.String())
	}
}
