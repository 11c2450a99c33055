package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// carmy serve stops at such a config, before it serves.
func TestServeRefusesProbeOutsideEgress(t *testing.T) {
	clearCarmyEnv(t)
	path := writeConfig(t, "egress:\n  allow: [10.0.0.0/8]\ntools:\n  - name: t\n    http: {url: \"http://10.0.0.1:9/orders\"}\n"+
		"    reconcile: {url: \"http://127.0.0.1:9/orders/{request_id}/status\"}\n")
	args := append(nodeArgs(t), "--http-addr", "127.0.0.1:0", "--config", path)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := newLogBuffer()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, args, io.Discard, logs) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "tools[0] (t): http tool: reconcile: url http://127.0.0.1:9/orders/{request_id}/status: its host 127.0.0.1 is outside the allowed networks") {
				t.Fatalf("serve = %v, want the config refused, naming the tool and the probe's url", err)
			}
			return
		case <-logs.changed:
			if servingLine.MatchString(logs.String()) {
				cancel()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
				}
				t.Fatalf("serve started with a reconcile url outside the egress policy; logs:\n%s", logs)
			}
		case <-deadline.C:
			t.Fatalf("serve neither refused the config nor served within 30 s; logs:\n%s", logs)
		}
	}
}
