package embed

import (
	"strings"
	"testing"
)

// TestResolveLimits pins the defaults of the per-principal limits: a
// running share once auth names a token principal, entry and byte quotas
// once it names two, a quarter of the cluster-wide bound each; explicit
// values win; a byte bound without room for one result is refused.
func TestResolveLimits(t *testing.T) {
	tokens := func(n int) AuthConfig {
		var a AuthConfig
		for range n {
			a.Tokens = append(a.Tokens, TokenConfig{Principal: "p"})
		}
		return a
	}
	cfg := Settings{MaxEntries: 100000}
	for _, tc := range []struct {
		name string
		cfg  Settings
		fc   FileConfig
		want limits
	}{
		{"auth off", cfg, FileConfig{}, limits{maxBytes: 1 << 30}},
		{"one tenant", cfg, FileConfig{Auth: tokens(1)}, limits{maxBytes: 1 << 30, runningShare: 256}},
		{"two tenants", cfg, FileConfig{Auth: tokens(2)},
			limits{maxBytes: 1 << 30, runningShare: 256, entriesPerPrincipal: 25000, bytesPerPrincipal: 1 << 28}},
		{"dev ignores tokens", Settings{MaxEntries: 100000, Dev: true}, FileConfig{Auth: tokens(2)}, limits{maxBytes: 1 << 30}},
		{"small max_running", cfg, FileConfig{Auth: tokens(1), Limits: LimitsConfig{MaxRunning: 3}}, limits{maxBytes: 1 << 30, runningShare: 1}},
		{"limits.max_bytes", cfg, FileConfig{Auth: tokens(2), Limits: LimitsConfig{MaxBytes: 400 << 20}},
			limits{maxBytes: 400 << 20, runningShare: 256, entriesPerPrincipal: 25000, bytesPerPrincipal: 100 << 20}},
		{"--max-bytes wins", Settings{MaxEntries: 100000, MaxBytes: 40 << 20}, FileConfig{Limits: LimitsConfig{MaxBytes: 400 << 20}},
			limits{maxBytes: 40 << 20}},
		{"explicit", cfg, FileConfig{Auth: tokens(3), Limits: LimitsConfig{MaxRunningPerPrincipal: 7, EntriesPerPrincipal: 9, BytesPerPrincipal: 5 << 20}},
			limits{maxBytes: 1 << 30, runningShare: 7, entriesPerPrincipal: 9, bytesPerPrincipal: 5 << 20}},
	} {
		got, err := resolveLimits(tc.cfg, tc.fc)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for name, fc := range map[string]FileConfig{
		"max_bytes":           {Limits: LimitsConfig{MaxBytes: 1 << 20}},
		"bytes_per_principal": {Limits: LimitsConfig{BytesPerPrincipal: 1000, ResultBytes: 2000}},
		"derived":             {Auth: tokens(2), Limits: LimitsConfig{MaxBytes: 3 << 20}},
		"token max_bytes":     {Auth: AuthConfig{Tokens: []TokenConfig{{Principal: "p", MaxBytes: 1 << 20}}}},
	} {
		if _, err := resolveLimits(cfg, fc); err == nil || !strings.Contains(err.Error(), "result_bytes") {
			t.Errorf("%s without room for one result: %v, want an error naming result_bytes", name, err)
		}
	}
}
