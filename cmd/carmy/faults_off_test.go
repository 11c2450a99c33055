//go:build !carmyfaults

package main

import (
	"net/http"
	"strings"
	"testing"
)

// The default build has no way to turn the test fault layer on.
func TestDefaultBuildHasNoFaultLayer(t *testing.T) {
	if f := newFaults(func(string) string { return "1" }, discardLogger()); f != nil {
		t.Fatal("newFaults returned a fault layer in the default build")
	}

	clearCarmyEnv(t)
	t.Setenv("CARMY_TEST_FAULTS", "1")
	s := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--cluster-key", testClusterKey)
	if code, body := getFaults(t, s, "k"); code == http.StatusOK {
		t.Fatalf("GET %s = %d %s: the default build serves the fault control", faultsPath, code, body)
	}
	if strings.Contains(s.logs.String(), "test fault layer") {
		t.Fatalf("the default build logged a fault layer:\n%s", s.logs)
	}
}
