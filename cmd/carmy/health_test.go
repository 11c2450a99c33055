package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestHealthCommand checks `carmy health` against a real node: ready and
// alive answer 0 (nil), a dead address and bad flags do not.
func TestHealthCommand(t *testing.T) {
	clearCarmyEnv(t)
	n := startServe(t, "--dev", "--http-addr", "127.0.0.1:0")
	n.waitReady(t)
	noEnv := func(string) string { return "" }
	var out, errOut bytes.Buffer
	for _, c := range []struct {
		args []string
		path string
	}{{[]string{"--addr", n.addr}, "/readyz"}, {[]string{"--addr", n.url(""), "--live"}, "/healthz"}} {
		out.Reset()
		if err := healthCmd(t.Context(), c.args, noEnv, &out, &errOut); err != nil {
			t.Fatalf("health %v: %v (%s)", c.args, err, errOut.String())
		}
		if !strings.Contains(out.String(), c.path+":") {
			t.Errorf("health %v printed %q, want the answer of %s", c.args, out.String(), c.path)
		}
	}
	// The env names the node too.
	if err := healthCmd(t.Context(), nil, func(k string) string {
		if k == envClusterAddr {
			return n.addr
		}
		return ""
	}, &out, &errOut); err != nil {
		t.Fatalf("health with $CARMY_ADDR: %v", err)
	}
	n.stop(t)
	if err := healthCmd(t.Context(), []string{"--addr", n.addr, "--timeout", "1s"}, noEnv, &out, &errOut); err == nil || errors.Is(err, errUsage) {
		t.Fatalf("health of a stopped node = %v, want a failure", err)
	}
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--addr", "no-port"}} {
		if err := healthCmd(t.Context(), args, noEnv, &out, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("health %v = %v, want a usage error", args, err)
		}
	}
}
