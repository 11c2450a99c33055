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

// keySet caches the issuer's keys. Fetches are single-flight: callers
// that find one running wait for it rather than start another.
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
// kid (any, when empty) and algorithm alg: fetching the set first when
// none is held or the held one is older than the refresh interval, and
// again when no key matches (each at most once per minimum interval).
func (k *keySet) candidates(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]verifyKey, error) {
	k.refreshIfStale(ctx)
	if found := k.match(kid, alg); len(found) > 0 {
		return found, nil
	}
	k.fetchIf(ctx, func(time.Time) bool { return true })
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

// refreshIfStale fetches the set when none is held or the held one is
// older than the refresh interval (at most once per minimum interval).
func (k *keySet) refreshIfStale(ctx context.Context) {
	k.fetchIf(ctx, func(now time.Time) bool {
		return k.fetched.IsZero() || now.Sub(k.fetched) >= k.refresh
	})
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

// fetchIf fetches the set when due (called under k.mu) says so and the
// last fetch started at least minGap ago; when due finds a fetch already
// running it waits for that one instead. A failed fetch keeps the keys
// held and is logged.
func (k *keySet) fetchIf(ctx context.Context, due func(now time.Time) bool) {
	k.mu.Lock()
	now := k.now()
	if !due(now) {
		k.mu.Unlock()
		return
	}
	if ch := k.inflight; ch != nil {
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	if !k.tried.IsZero() && now.Sub(k.tried) < k.minGap {
		k.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	k.inflight, k.tried = ch, now
	k.mu.Unlock()

	// The fetch outlives a caller that leaves: others may wait for it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
	keys, err := k.fetch(fctx)
	cancel()

	k.mu.Lock()
	if err != nil {
		k.log.Warn("oauth: fetching the issuer's keys failed; keeping the keys held", slog.String("jwks_url", k.url), slog.Int("keys_held", len(k.keys)), slog.Any("err", err))
	} else {
		if !slices.EqualFunc(keys, k.keys, sameKey) {
			k.gen++
		}
		k.keys, k.fetched = keys, now
	}
	k.inflight = nil
	close(ch)
	k.mu.Unlock()
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
