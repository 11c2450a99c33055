// Package oauthtest runs an OAuth authorization server's key endpoint for
// tests: an HTTP server on 127.0.0.1 that publishes a JWK Set of keys the
// test makes, and signs access tokens with them.
package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer publishes its keys at JWKSURL and signs tokens. Its URL is its
// issuer identifier.
type Issuer struct {
	URL     string
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]signingKey
	order   []string
	down    bool
	hang    chan struct{} // non-nil: requests wait for it to close
	fetches atomic.Int64
}

type signingKey struct {
	alg       jose.SignatureAlgorithm
	priv      crypto.Signer
	published bool
}

// JWKSPath is where the key set is served.
const JWKSPath = "/jwks.json"

// NewIssuer starts an issuer with no keys; it stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{keys: make(map[string]signingKey)}
	iss.srv = httptest.NewServer(http.HandlerFunc(iss.serve))
	t.Cleanup(iss.srv.Close)
	t.Cleanup(func() { iss.SetHang(false) }) // before Close, which waits for them
	iss.URL = iss.srv.URL
	return iss
}

// JWKSURL is the key set's URL.
func (iss *Issuer) JWKSURL() string { return iss.URL + JWKSPath }

func (iss *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != JWKSPath {
		http.NotFound(w, r)
		return
	}
	iss.fetches.Add(1)
	iss.mu.Lock()
	if hang := iss.hang; hang != nil {
		iss.mu.Unlock()
		select {
		case <-hang:
		case <-r.Context().Done():
			return
		}
		iss.mu.Lock()
	}
	defer iss.mu.Unlock()
	if iss.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var set jose.JSONWebKeySet
	for _, kid := range iss.order {
		k := iss.keys[kid]
		if k.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: kid, Algorithm: string(k.alg), Use: "sig"})
		}
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_ = json.NewEncoder(w).Encode(set)
}

// Fetches counts the requests for the key set so far.
func (iss *Issuer) Fetches() int64 { return iss.fetches.Load() }

// SetDown makes the key set answer 503 (down) or serve again.
func (iss *Issuer) SetDown(down bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.down = down
}

// SetHang makes the key set's requests hang, answering nothing until
// SetHang(false) (then they are served), their client leaves or the test
// ends; or stops that.
func (iss *Issuer) SetHang(hang bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	switch {
	case hang && iss.hang == nil:
		iss.hang = make(chan struct{})
	case !hang && iss.hang != nil:
		close(iss.hang)
		iss.hang = nil
	}
}

// AddKey makes a key for alg (RS256 or ES256), published under kid.
func (iss *Issuer) AddKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) {
	t.Helper()
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("oauthtest: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys[kid] = signingKey{alg: alg, priv: priv, published: true}
	iss.order = append(iss.order, kid)
}

// Unpublish leaves kid out of the key set; it still signs.
func (iss *Issuer) Unpublish(kid string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	k := iss.keys[kid]
	k.published = false
	iss.keys[kid] = k
}

// Claims returns the usual claims of an access token for sub and aud,
// valid for ttl from now.
func (iss *Issuer) Claims(sub, aud string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": iss.URL, "sub": sub, "aud": aud,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix(),
	}
}

// Sign signs claims with the key kid, naming kid in the header unless
// hideKid.
func (iss *Issuer) Sign(t testing.TB, kid string, hideKid bool, claims map[string]any) string {
	t.Helper()
	headerKid := kid
	if hideKid {
		headerKid = ""
	}
	return iss.SignAs(t, kid, "", headerKid, claims)
}

// SignAs signs claims with the private key kid under algorithm alg (the
// key's own when empty), naming headerKid as the key id in the header.
func (iss *Issuer) SignAs(t testing.TB, kid string, alg jose.SignatureAlgorithm, headerKid string, claims map[string]any) string {
	t.Helper()
	iss.mu.Lock()
	k, ok := iss.keys[kid]
	iss.mu.Unlock()
	if !ok {
		t.Fatalf("oauthtest: no key %q", kid)
	}
	if alg == "" {
		alg = k.alg
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: headerKid}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Token signs the usual claims for sub and aud (valid for a minute) with
// kid, plus extra claims.
func (iss *Issuer) Token(t testing.TB, kid, sub, aud string, extra map[string]any) string {
	t.Helper()
	claims := iss.Claims(sub, aud, time.Minute)
	for k, v := range extra {
		claims[k] = v
	}
	return iss.Sign(t, kid, false, claims)
}

// Unsigned returns claims as a JWT with alg "none" and no signature.
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
}
