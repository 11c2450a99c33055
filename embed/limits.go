package embed

import (
	"fmt"

	"github.com/carmyhq/carmy"
)

// DefaultMaxBytes is the cluster-wide bound on bytes when neither
// Settings.MaxBytes (carmy serve's --max-bytes) nor limits.max_bytes sets one: 1 GiB of records
// (store.RecordSize), which each replica holds in memory and writes into
// every snapshot. The bound on entries alone does not bound memory: with
// the default 100,000 entries and 1 MiB results, records could reach
// 100 GiB. 1 GiB is ~10 KiB per record at the default entry bound, and
// with the measured overhead (README, sizing) a node needs ~1.5 GiB of
// heap for a full store.
const DefaultMaxBytes int64 = 1 << 30

// DefaultMaxEntries is the capacity of the node's store, in records,
// when Settings.MaxEntries sets none (carmy serve's --max-entries).
const DefaultMaxEntries = 100000

// perPrincipalFraction is the share of a cluster-wide bound each
// principal gets by default: a quarter.
const perPrincipalFraction = 4

// limits are the per-principal bounds in force, after the defaults.
type limits struct {
	// maxBytes is the cluster-wide bound on bytes (the leader's applies).
	maxBytes int64
	// runningShare is engine.Config.MaxRunningPerPrincipal.
	runningShare int
	// entriesPerPrincipal and bytesPerPrincipal are the defaults of every
	// principal's quotas (api.Auth.MaxEntriesPerPrincipal, …).
	entriesPerPrincipal int
	bytesPerPrincipal   int64
}

// resolveLimits applies the defaults to the limits of the config file
// and the settings (carmy serve's flags):
//
//   - max_bytes: Settings.MaxBytes (--max-bytes, CARMY_MAX_BYTES), else
//     limits.max_bytes, else DefaultMaxBytes (1 GiB).
//   - max_running_per_principal: when unset and auth names at least one
//     token principal, max_running/4 (at least 1): no tenant can take the
//     whole node, and the admin keeps max_running/8 slots of its own.
//   - entries_per_principal and bytes_per_principal: when unset and auth
//     names at least two token principals (auth.oauth counts as two: an
//     issuer names any number), a quarter of Settings.MaxEntries and
//     of max_bytes: no tenant can fill the store for the others. With one
//     token principal (a single tenant) they stay unbounded, so it can
//     use the whole store.
//
// Every byte bound must leave room for one result (limits.result_bytes),
// which a reservation asks for: a smaller one could never reserve.
func resolveLimits(cfg Settings, fc FileConfig) (limits, error) {
	l := limits{
		maxBytes:            DefaultMaxBytes,
		runningShare:        fc.Limits.MaxRunningPerPrincipal,
		entriesPerPrincipal: fc.Limits.EntriesPerPrincipal,
		bytesPerPrincipal:   fc.Limits.BytesPerPrincipal,
	}
	switch {
	case cfg.MaxBytes > 0:
		l.maxBytes = cfg.MaxBytes
	case fc.Limits.MaxBytes > 0:
		l.maxBytes = fc.Limits.MaxBytes
	}
	tokens := 0
	if !cfg.Dev {
		tokens = len(fc.Auth.Tokens)
		if fc.Auth.OAuth != nil {
			// An issuer names any number of principals.
			tokens += 2
		}
	}
	maxRunning := fc.Limits.MaxRunning
	if maxRunning == 0 {
		maxRunning = carmy.DefaultMaxRunning
	}
	if l.runningShare == 0 && tokens >= 1 {
		l.runningShare = max(1, maxRunning/perPrincipalFraction)
	}
	if l.entriesPerPrincipal == 0 && tokens >= 2 {
		l.entriesPerPrincipal = max(1, cfg.MaxEntries/perPrincipalFraction)
	}
	if l.bytesPerPrincipal == 0 && tokens >= 2 {
		l.bytesPerPrincipal = l.maxBytes / perPrincipalFraction
	}
	resultBytes := int64(fc.Limits.ResultBytes)
	if resultBytes == 0 {
		resultBytes = carmy.DefaultMaxResultBytes
	}
	roomy := func(what string, n int64) error {
		if n != 0 && n <= resultBytes {
			return fmt.Errorf("%s %d: must be larger than limits.result_bytes (%d), the room a reservation asks for its result", what, n, resultBytes)
		}
		return nil
	}
	if err := roomy("max bytes (--max-bytes, limits.max_bytes)", l.maxBytes); err != nil {
		return l, err
	}
	if err := roomy("limits.bytes_per_principal (default: a quarter of max bytes with two or more token principals)", l.bytesPerPrincipal); err != nil {
		return l, err
	}
	for i, t := range fc.Auth.Tokens {
		if err := roomy(fmt.Sprintf("auth.tokens[%d] (%s): max_bytes", i, t.Principal), t.MaxBytes); err != nil {
			return l, err
		}
	}
	return l, nil
}
