package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// algorithms are the signature algorithms a token may use: asymmetric
// ones only ("none" and HMAC, whose key would be public, never).
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// verifyKey is a public key of the set with the one algorithm it
// verifies.
type verifyKey struct {
	id  string
	alg jose.SignatureAlgorithm
	key any
}

// keySet caches the issuer's keys. Fetches run in the background, one at
// a time: a request never waits for one longer than its need calls for
// (see candidates).
type keySet struct {
	url      string
	client   *http.Client
	refresh  time.Duration
	minGap   time.Duration
	now      func() time.Time
	log      *slog.Logger
	mu       sync.Mutex
	keys     []verifyKey
	fetched  time.Time     // of the keys held; zero: none yet
	tried    time.Time     // the last fetch's start
	inflight chan struct{} // closed when the running fetch ends
	// gen counts the fetches that changed the keys.
	gen uint64
}

func newKeySet(c Config) *keySet {
	return &keySet{url: c.JWKSURL, client: c.HTTPClient, refresh: c.Refresh, minGap: c.MinRefreshInterval, now: c.Now, log: c.Logger}
}

// candidates returns the keys that may have signed a token with key id
// kid (any, when empty) and algorithm alg, among the keys held. When none
// matches — the issuer rotated its keys, or kid is made up — it starts a
// fetch (at most once per minimum interval; or finds one running) and
// waits for it at most UnknownKeyWait: past that the token is refused,
// and the fetch goes on for the tokens that follow. Stale keys are
// refreshed by refreshIfStale, in the background.
func (k *keySet) candidates(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]verifyKey, error) {
	if found := k.match(kid, alg); len(found) > 0 {
		return found, nil
	}
	if running, _ := k.start(func(time.Time) bool { return true }); running != nil {
		await(ctx, running, UnknownKeyWait)
	}
	if found := k.match(kid, alg); len(found) > 0 {
		return found, nil
	}
	if kid == "" {
		return nil, fmt.Errorf("no key of the issuer's set is for %s", alg)
	}
	return nil, fmt.Errorf("no key %q for %s in the issuer's set", kid, alg)
}

// generation returns the count of fetches that changed the keys.
func (k *keySet) generation() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

// sameKey reports whether a and b are one key for one algorithm.
func sameKey(a, b verifyKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.key.(equaler)
	return ok && a.id == b.id && a.alg == b.alg && e.Equal(b.key)
}

// refreshIfStale starts a fetch of the set when none is held or the held
// one is older than the refresh interval (at most once per minimum
// interval), and returns at once while keys are held: they serve until
// the fetch replaces them, however long the issuer takes. Only without
// any key (the first fetch) does it wait for the fetch, or for ctx.
func (k *keySet) refreshIfStale(ctx context.Context) {
	running, held := k.start(func(now time.Time) bool {
		return k.fetched.IsZero() || now.Sub(k.fetched) >= k.refresh
	})
	if running != nil && !held {
		await(ctx, running, FetchTimeout)
	}
}

// match returns the held keys of id kid (any, when empty) and algorithm
// alg.
func (k *keySet) match(kid string, alg jose.SignatureAlgorithm) []verifyKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	var found []verifyKey
	for _, key := range k.keys {
		if (kid == "" || key.id == kid) && key.alg == alg {
			found = append(found, key)
		}
	}
	return found
}

// start starts a fetch of the set in the background when due (called
// under k.mu) says so, none is running and the last one started at least
// minGap ago. It returns the channel that the running fetch — the one it
// started, or one it found — closes when it ends (nil when none runs),
// and whether keys are held.
func (k *keySet) start(due func(now time.Time) bool) (running <-chan struct{}, held bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	held = len(k.keys) > 0
	if !due(now) {
		return nil, held
	}
	if k.inflight != nil {
		return k.inflight, held
	}
	if !k.tried.IsZero() && now.Sub(k.tried) < k.minGap {
		return nil, held
	}
	ch := make(chan struct{})
	k.inflight, k.tried = ch, now
	go k.run(ch, now)
	return ch, held
}

// run fetches the set, bounded by FetchTimeout, and closes ch. A failed
// fetch keeps the keys held and is logged.
func (k *keySet) run(ch chan struct{}, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
	keys, err := k.fetch(ctx)
	cancel()

	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.log.Warn("oauth: fetching the issuer's keys failed; keeping the keys held", slog.String("jwks_url", k.url), slog.Int("keys_held", len(k.keys)), slog.Any("err", err))
	} else {
		if !slices.EqualFunc(keys, k.keys, sameKey) {
			k.gen++
		}
		k.keys, k.fetched = keys, started
	}
	k.inflight = nil
	close(ch)
}

// await waits until running is closed, d has passed or ctx ends.
func await(ctx context.Context, running <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-running:
	case <-t.C:
	case <-ctx.Done():
	}
}

// fetch reads the key set at k.url: its usable signing keys (others are
// skipped and logged at DEBUG); an answer that is not 200 or holds no
// usable key is an error.
func (k *keySet) fetch(ctx context.Context) ([]verifyKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("oauth: key set request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: key set: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oauth: key set: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("oauth: key set: %w", err)
	}
	if len(body) > MaxKeySetBytes {
		return nil, fmt.Errorf("oauth: key set: larger than %d bytes", MaxKeySetBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("oauth: key set: %w", err)
	}
	var keys []verifyKey
	for i, raw := range set.Keys {
		key, err := parseKey(raw)
		if err != nil {
			k.log.Debug("oauth: skipping a key of the issuer's set", slog.Int("index", i), slog.Any("err", err))
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("oauth: key set: no usable signing key among %d", len(set.Keys))
	}
	return keys, nil
}

// parseKey reads one JWK: a public signing key (use absent or "sig")
// with the algorithm it names, or, naming none, the one its type
// implies (RSA: RS256; EC: ES256, ES384 or ES512 by curve; Ed25519:
// EdDSA). Symmetric keys are refused.
func parseKey(raw json.RawMessage) (verifyKey, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return verifyKey{}, err
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return verifyKey{}, fmt.Errorf("key %q is for %q, not sig", jwk.KeyID, jwk.Use)
	}
	pub := jwk.Public()
	if !pub.Valid() {
		return verifyKey{}, fmt.Errorf("key %q is not an asymmetric key", jwk.KeyID)
	}
	implied, err := impliedAlg(pub.Key)
	if err != nil {
		return verifyKey{}, fmt.Errorf("key %q: %w", jwk.KeyID, err)
	}
	alg := implied
	if jwk.Algorithm != "" {
		alg = jose.SignatureAlgorithm(jwk.Algorithm)
		if !slices.Contains(algorithms, alg) || !fits(alg, implied) {
			return verifyKey{}, fmt.Errorf("key %q: algorithm %q is not supported for its key type", jwk.KeyID, jwk.Algorithm)
		}
	}
	return verifyKey{id: jwk.KeyID, alg: alg, key: pub.Key}, nil
}

// impliedAlg is the algorithm a key's type implies.
func impliedAlg(key any) (jose.SignatureAlgorithm, error) {
	switch key := key.(type) {
	case *rsa.PublicKey:
		return jose.RS256, nil
	case *ecdsa.PublicKey:
		switch key.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return "", fmt.Errorf("unsupported curve %s", key.Curve.Params().Name)
	case ed25519.PublicKey:
		return jose.EdDSA, nil
	}
	return "", fmt.Errorf("unsupported key type %T", key)
}

// fits reports whether a key whose type implies implied may verify alg:
// the RSA family for RSA keys; for others only the implied one.
func fits(alg, implied jose.SignatureAlgorithm) bool {
	if implied == jose.RS256 {
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
		return false
	}
	return alg == implied
}
