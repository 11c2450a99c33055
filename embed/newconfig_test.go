package embed_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/store/postgres"
)

// newConfig calls embed.NewConfig and shuts the runtime it built down at
// cleanup.
func newConfig(t *testing.T, s embed.Settings) (embed.Config, error) {
	t.Helper()
	cfg, err := embed.NewConfig(s)
	if cfg.Runtime != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := cfg.Runtime.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	return cfg, err
}

// loadFile writes text as a config file and loads it.
func loadFile(t *testing.T, text string) *embed.FileConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := embed.LoadConfig(path)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	return fc
}

// twoTenants is a config file naming two token principals: the per-tenant
// fair shares and byte bounds apply by default (docs/security.md).
const twoTenants = `auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN}
    - {principal: billing, token_env: BILLING_TOKEN}
api:
  allowed_hosts: [carmy.example.com]
limits:
  max_bytes: 104857600
`

func tenantsEnv(name string) string {
	return map[string]string{"PLANNER_TOKEN": "planner-token-0000001", "BILLING_TOKEN": "billing-token-0000001"}[name]
}

// TestNewConfigAppliesTenantPolicy: the Config NewConfig returns carries
// the policy carmy serve applies: the per-principal running share, entry
// and byte quotas by default with two tenants, the store's bounds on the
// backend, the file's access rules on the API, the audit retention's
// default; the caller's backend config is not changed.
func TestNewConfigAppliesTenantPolicy(t *testing.T) {
	raft := &cluster.Config{RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Bootstrap: true}
	s := embed.Settings{File: loadFile(t, twoTenants), NodeID: "n1", DataDir: t.TempDir(), Logger: quietLogger(),
		Getenv: tenantsEnv, HTTPAddr: "127.0.0.1:8080", MaxEntries: 1000, Raft: raft}
	cfg, err := newConfig(t, s)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	if got := cfg.Runtime.Config().MaxRunningPerPrincipal; got != carmy.DefaultMaxRunning/4 {
		t.Errorf("running share = %d, want max_running/4 = %d", got, carmy.DefaultMaxRunning/4)
	}
	if a := cfg.API.Auth; !a.Enabled() || len(a.Tokens) != 2 || a.MaxEntriesPerPrincipal != 250 || a.MaxBytesPerPrincipal != 100<<20/4 {
		t.Errorf("auth = enabled %v, %d tokens, entries/principal %d, bytes/principal %d; want on, 2, 250, %d",
			a.Enabled(), len(a.Tokens), a.MaxEntriesPerPrincipal, a.MaxBytesPerPrincipal, 100<<20/4)
	}
	if r := cfg.Raft; r == nil || r.MaxEntries != 1000 || r.MaxBytes != 100<<20 || r.AuditRetention != 400*24*time.Hour ||
		r.DataDir != s.DataDir || r.Logger == nil || !r.Bootstrap {
		t.Errorf("Raft = %+v; want MaxEntries 1000, MaxBytes 100 MiB, AuditRetention 400d, the data dir, a logger, Bootstrap kept", r)
	}
	if raft.MaxBytes != 0 || raft.DataDir != "" {
		t.Errorf("NewConfig changed the caller's Raft config: %+v", raft)
	}
	if !reflect.DeepEqual(cfg.API.AllowedHosts, []string{"carmy.example.com"}) || !reflect.DeepEqual(cfg.API.OwnHosts, []string{"127.0.0.1"}) {
		t.Errorf("API hosts = allowed %v, own %v; want the file's and the HTTPAddr's", cfg.API.AllowedHosts, cfg.API.OwnHosts)
	}
	if cfg.Postgres != nil || cfg.Listener != nil {
		t.Errorf("Postgres = %v, Listener = %v; want neither", cfg.Postgres, cfg.Listener)
	}
}

// TestNewConfigFleet: a fleet node's store gets the bounds, its fleet the
// audit settings; Settings.MaxBytes wins over limits.max_bytes.
func TestNewConfigFleet(t *testing.T) {
	s := embed.Settings{File: loadFile(t, twoTenants), NodeID: "n1", Logger: quietLogger(), Getenv: tenantsEnv,
		HTTPAddr: "127.0.0.1:8080", MaxBytes: 40 << 20,
		Postgres: &embed.PostgresConfig{Fleet: postgres.FleetConfig{Lease: 3 * time.Second}}}
	cfg, err := newConfig(t, s)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	p := cfg.Postgres
	if p == nil || p.Store.Capacity != embed.DefaultMaxEntries || p.Store.MaxBytes != 40<<20 || p.Fleet.Lease != 3*time.Second ||
		p.Fleet.AuditRetention != 400*24*time.Hour || p.Fleet.Logger == nil {
		t.Fatalf("Postgres = %+v; want the default capacity, 40 MiB, the lease kept, AuditRetention 400d, a logger", p)
	}
	if a := cfg.API.Auth; a.MaxEntriesPerPrincipal != embed.DefaultMaxEntries/4 || a.MaxBytesPerPrincipal != 10<<20 {
		t.Errorf("quotas = %d entries, %d bytes; want a quarter of the store's bounds", a.MaxEntriesPerPrincipal, a.MaxBytesPerPrincipal)
	}
}

// TestNewConfigRefusesAnonymousOffLoopback: without auth (and not Dev),
// every listener must be on loopback; the refusal is an *OffLoopbackError
// naming the listener, worded as carmy serve words it.
func TestNewConfigRefusesAnonymousOffLoopback(t *testing.T) {
	for _, tt := range []struct {
		name, http, raft, wantFlag, wantAddr string
	}{
		{"http", "10.1.2.3:8080", "127.0.0.1:8300", "--http-addr", "10.1.2.3:8080"},
		{"raft", "127.0.0.1:8080", "10.1.2.3:8300", "--raft-addr", "10.1.2.3:8300"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := embed.Settings{NodeID: "n1", Logger: quietLogger(), Getenv: func(string) string { return "" }, HTTPAddr: tt.http,
				Raft: &cluster.Config{RaftAddr: tt.raft, GossipAddr: "127.0.0.1:8301"}}
			_, err := newConfig(t, s)
			var oe *embed.OffLoopbackError
			if !errors.As(err, &oe) || oe.Flag != tt.wantFlag || oe.Addr != tt.wantAddr {
				t.Fatalf("NewConfig = %v; want an *OffLoopbackError of %s %s", err, tt.wantFlag, tt.wantAddr)
			}
			want := "refusing to start: " + tt.wantFlag + " " + tt.wantAddr + " is not a loopback address and no auth tokens are configured"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %q, want it to begin %q", err, want)
			}
			s.Dev = true
			if _, err := newConfig(t, s); err != nil {
				t.Errorf("NewConfig with Dev = %v, want anonymous callers allowed", err)
			}
		})
	}
}

// TestNewConfigNeedsOneBackend: Settings names exactly one backend, and a
// node id.
func TestNewConfigNeedsOneBackend(t *testing.T) {
	for name, s := range map[string]embed.Settings{
		"none":    {NodeID: "n1"},
		"both":    {NodeID: "n1", Raft: &cluster.Config{}, Postgres: &embed.PostgresConfig{}},
		"no node": {Raft: &cluster.Config{}},
	} {
		if cfg, err := newConfig(t, s); err == nil || cfg.Runtime != nil {
			t.Errorf("%s: NewConfig = %v; want an error and no runtime", name, err)
		}
	}
}
