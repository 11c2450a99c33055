package carmy_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
)

// TestServingRefusesSetupErrors checks that Run, ListenAndServe and Serve
// refuse a runtime with setup problems rather than serve it.
func TestServingRefusesSetupErrors(t *testing.T) {
	app := newApp(t)
	app.Tool("nil", nil)
	if err := app.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no function") {
		t.Fatalf("Run = %v, want the setup error", err)
	}
	if err := app.ListenAndServe(t.Context(), "127.0.0.1:0", api.Config{}); err == nil || !strings.Contains(err.Error(), "no function") {
		t.Fatalf("ListenAndServe = %v, want the setup error", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := app.Serve(t.Context(), ln, api.Config{}); err == nil || !strings.Contains(err.Error(), "no function") {
		t.Fatalf("Serve = %v, want the setup error", err)
	}
}

// TestListenAndServeRefusesOpenAddressWithoutAuth checks the loopback
// rule of Run and ListenAndServe: without tokens, only loopback.
func TestListenAndServeRefusesOpenAddressWithoutAuth(t *testing.T) {
	app := newApp(t)
	err := app.ListenAndServe(context.Background(), "0.0.0.0:0", api.Config{})
	if err == nil || !strings.Contains(err.Error(), "without authentication") {
		t.Fatalf("ListenAndServe(0.0.0.0:0) = %v, want a refusal", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:1": true, ":8080": false, "10.0.0.1:1": false} {
		if got := carmy.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
