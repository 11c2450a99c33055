package oauth_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/carmyhq/carmy/api/oauth"
	"github.com/carmyhq/carmy/api/oauth/oauthtest"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

const aud = "https://carmy.test/mcp"

// clock is a settable clock for the key cache (tokens use real time).
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func newVerifier(t *testing.T, iss *oauthtest.Issuer, clk *clock, tweak func(*oauth.Config)) *oauth.Verifier {
	t.Helper()
	cfg := oauth.Config{Issuer: iss.URL, Audience: aud, JWKSURL: iss.JWKSURL(), Refresh: time.Hour, MinRefreshInterval: time.Minute}
	if clk != nil {
		cfg.Now = clk.now
	}
	if tweak != nil {
		tweak(&cfg)
	}
	v, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newBenchVerifier(iss *oauthtest.Issuer) (*oauth.Verifier, error) {
	return oauth.New(oauth.Config{Issuer: iss.URL, Audience: aud, JWKSURL: iss.JWKSURL()})
}

func mustVerify(t *testing.T, v *oauth.Verifier, token string) oauth.Identity {
	t.Helper()
	id, err := v.Verify(context.Background(), token)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return id
}

func mustRefuse(t *testing.T, v *oauth.Verifier, token, why string) {
	t.Helper()
	id, err := v.Verify(context.Background(), token)
	if !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("%s: Verify = %+v, %v; want ErrInvalidToken", why, id, err)
	}
}

// TestVerifyValidTokens checks RS256 and ES256 tokens, with and without a
// key id, and the principal and tools claims.
func TestVerifyValidTokens(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "rsa-1", jose.RS256)
	iss.AddKey(t, "ec-1", jose.ES256)
	v := newVerifier(t, iss, nil, nil)
	for _, kid := range []string{"rsa-1", "ec-1"} {
		id := mustVerify(t, v, iss.Token(t, kid, "alice", aud, nil))
		if id.Principal != "alice" || !id.AllTools || id.Tools != nil || id.Expiry.IsZero() {
			t.Errorf("%s: %+v, want alice with every tool", kid, id)
		}
		id = mustVerify(t, v, iss.Sign(t, kid, true, iss.Claims("bob", aud, time.Minute)))
		if id.Principal != "bob" {
			t.Errorf("%s without kid: %+v", kid, id)
		}
	}
	// aud may be an array naming the audience among others.
	claims := iss.Claims("carol", aud, time.Minute)
	claims["aud"] = []string{"other", aud}
	if id := mustVerify(t, v, iss.Sign(t, "ec-1", false, claims)); id.Principal != "carol" {
		t.Errorf("aud array: %+v", id)
	}

	tv := newVerifier(t, iss, nil, func(c *oauth.Config) { c.PrincipalClaim, c.ToolsClaim = "email", "carmy_tools" })
	for _, tc := range []struct {
		name  string
		tools any
		want  []string
		all   bool
	}{
		{"array", []string{"echo", "create_order"}, []string{"echo", "create_order"}, false},
		{"space-separated", "echo  create_order", []string{"echo", "create_order"}, false},
		{"star", []string{"*"}, nil, true},
		{"absent", nil, []string{}, false},
	} {
		extra := map[string]any{"email": "dave@example.com"}
		if tc.tools != nil {
			extra["carmy_tools"] = tc.tools
		}
		id := mustVerify(t, tv, iss.Token(t, "rsa-1", "ignored", aud, extra))
		if id.Principal != "dave@example.com" || id.AllTools != tc.all || !slices.Equal(id.Tools, tc.want) || (tc.want != nil && id.Tools == nil) {
			t.Errorf("%s: %+v, want tools %q all %v", tc.name, id, tc.want, tc.all)
		}
	}
	mustRefuse(t, tv, iss.Token(t, "rsa-1", "x", aud, map[string]any{"email": "e@x", "carmy_tools": 7}), "tools claim a number")
	mustRefuse(t, tv, iss.Token(t, "rsa-1", "x", aud, nil), "no principal claim")
}

// TestVerifyRefusals checks the tokens that must never pass.
func TestVerifyRefusals(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "rsa-1", jose.RS256)
	iss.AddKey(t, "ec-1", jose.ES256)
	iss.AddKey(t, "evil", jose.RS256)
	iss.Unpublish("evil")
	v := newVerifier(t, iss, nil, nil)
	good := iss.Claims("alice", aud, time.Minute)
	with := func(k string, val any) map[string]any {
		c := make(map[string]any, len(good))
		for k, v := range good {
			c[k] = v
		}
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	now := time.Now()
	valid := iss.Sign(t, "rsa-1", false, good)
	parts := strings.Split(valid, ".")
	other := strings.Split(iss.Sign(t, "rsa-1", false, with("sub", "mallory")), ".")
	for _, tc := range []struct{ why, token string }{
		{"wrong audience", iss.Sign(t, "rsa-1", false, with("aud", "https://other.test/mcp"))},
		{"no audience", iss.Sign(t, "rsa-1", false, with("aud", nil))},
		{"wrong issuer", iss.Sign(t, "rsa-1", false, with("iss", "https://other-issuer.test"))},
		{"expired beyond the leeway", iss.Sign(t, "rsa-1", false, with("exp", now.Add(-oauth.Leeway-5*time.Second).Unix()))},
		{"not yet valid beyond the leeway", iss.Sign(t, "rsa-1", false, with("nbf", now.Add(oauth.Leeway+time.Minute).Unix()))},
		{"no exp", iss.Sign(t, "rsa-1", false, with("exp", nil))},
		{"signed by an unpublished key naming a published one", iss.SignAs(t, "evil", "", "rsa-1", good)},
		{"signed by an unpublished key naming none", iss.SignAs(t, "evil", "", "", good)},
		{"payload swapped under a signature", parts[0] + "." + other[1] + "." + parts[2]},
		{"signature cut", parts[0] + "." + parts[1] + "."},
		{"alg none", oauthtest.Unsigned(t, good)},
		{"alg other than the key's (PS256 with an RS256 key)", iss.SignAs(t, "rsa-1", jose.PS256, "rsa-1", good)},
		{"an EC key named for an RSA signature", iss.SignAs(t, "rsa-1", "", "ec-1", good)},
		{"HS256 with the public key as secret", hmacToken(t, good)},
		{"not a JWT", "a.b.c"},
	} {
		mustRefuse(t, v, tc.token, tc.why)
	}
	// Within the leeway an expired token still passes.
	mustVerify(t, v, iss.Sign(t, "rsa-1", false, with("exp", now.Add(-oauth.Leeway/2).Unix())))
}

// hmacToken signs claims with HS256 under a key id of the set.
func hmacToken(t *testing.T, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "rsa-1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// long is a token valid for a day, for tests that move the clock.
func long(t *testing.T, iss *oauthtest.Issuer, kid, sub string) string {
	return iss.Sign(t, kid, false, iss.Claims(sub, aud, 24*time.Hour))
}

// TestVerifyRotation checks that a token of a key the cache lacks makes
// it fetch the set again, at most once per minimum interval.
func TestVerifyRotation(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.RS256)
	clk := &clock{}
	v := newVerifier(t, iss, clk, nil)
	mustVerify(t, v, long(t, iss, "k1", "alice"))
	mustVerify(t, v, long(t, iss, "k1", "alice"))
	if n := iss.Fetches(); n != 1 {
		t.Fatalf("fetches after two tokens of one key: %d, want 1", n)
	}
	// The issuer rotates to k2 a moment later: the first k2 token is
	// refused, for the last fetch is too recent, and costs no fetch.
	iss.AddKey(t, "k2", jose.ES256)
	iss.Unpublish("k1")
	mustRefuse(t, v, long(t, iss, "k2", "alice"), "unknown kid within the minimum interval")
	mustRefuse(t, v, iss.SignAs(t, "k2", "", "nope", iss.Claims("alice", aud, 24*time.Hour)), "unknown kid (made up)")
	if n := iss.Fetches(); n != 1 {
		t.Fatalf("fetches within the minimum interval: %d, want 1", n)
	}
	clk.advance(time.Minute)
	if id := mustVerify(t, v, long(t, iss, "k2", "bob")); id.Principal != "bob" {
		t.Errorf("after rotation: %+v", id)
	}
	if n := iss.Fetches(); n != 2 {
		t.Fatalf("fetches after the rotated key: %d, want 2", n)
	}
	// k1 left the set with that fetch.
	mustRefuse(t, v, long(t, iss, "k1", "alice"), "a key that left the set")

	// Many tokens of an unknown key at once cause one fetch.
	clk.advance(time.Minute)
	before := iss.Fetches()
	iss.AddKey(t, "k3", jose.ES256)
	token := long(t, iss, "k3", "carol")
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 16 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), token); err == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if n := iss.Fetches() - before; n != 1 || ok.Load() != 16 {
		t.Errorf("16 tokens of a new key at once: %d fetches, %d verified; want 1 and 16", n, ok.Load())
	}
}

// TestVerifyIssuerDown checks that keys held keep verifying while the
// key set cannot be fetched, and that refresh is periodic.
func TestVerifyIssuerDown(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	clk := &clock{}
	v := newVerifier(t, iss, clk, nil)
	mustVerify(t, v, long(t, iss, "k1", "alice"))
	iss.SetDown(true)
	clk.advance(2 * time.Hour) // past Refresh: the next token starts a refresh
	mustVerify(t, v, long(t, iss, "k1", "alice"))
	wait.Until(t, 10*time.Second, "one refresh tried", func() bool { return iss.Fetches() == 2 })
	mustVerify(t, v, long(t, iss, "k1", "alice"))
	if n := iss.Fetches(); n != 2 {
		t.Fatalf("fetches right after a failed one: %d, want 2", n)
	}
	iss.SetDown(false)
	clk.advance(time.Minute)
	// Each token starts the refresh once the failed one has ended.
	wait.Until(t, 10*time.Second, "a refresh once back", func() bool {
		mustVerify(t, v, long(t, iss, "k1", "alice"))
		return iss.Fetches() == 3
	})

	// A verifier that never got keys refuses every token.
	down := oauthtest.NewIssuer(t)
	down.AddKey(t, "k1", jose.RS256)
	down.SetDown(true)
	mustRefuse(t, newVerifier(t, down, nil, nil), long(t, down, "k1", "alice"), "no keys ever fetched")
}

// TestConfigValidate checks that a bad config names its key.
func TestConfigValidate(t *testing.T) {
	good := oauth.Config{Issuer: "https://id.example.com", Audience: aud, JWKSURL: "https://id.example.com/jwks"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	loop := good
	loop.Issuer, loop.JWKSURL = "http://127.0.0.1:9000", "http://localhost:9000/jwks"
	if err := loop.Validate(); err != nil {
		t.Errorf("http on loopback: %v", err)
	}
	for _, tc := range []struct {
		key  string
		edit func(*oauth.Config)
	}{
		{"issuer", func(c *oauth.Config) { c.Issuer = "" }},
		{"issuer", func(c *oauth.Config) { c.Issuer = "http://id.example.com" }},
		{"issuer", func(c *oauth.Config) { c.Issuer = "id.example.com" }},
		{"audience", func(c *oauth.Config) { c.Audience = " " }},
		{"jwks_url", func(c *oauth.Config) { c.JWKSURL = "" }},
		{"jwks_url", func(c *oauth.Config) { c.JWKSURL = "ftp://id.example.com/jwks" }},
		{"principal_claim", func(c *oauth.Config) { c.PrincipalClaim = " sub" }},
		{"tools_claim", func(c *oauth.Config) { c.ToolsClaim = "tools " }},
		{"refresh", func(c *oauth.Config) { c.Refresh = time.Millisecond }},
	} {
		c := good
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "auth.oauth."+tc.key) {
			t.Errorf("%+v: %v, want an error naming auth.oauth.%s", c, err, tc.key)
		}
	}
}

// TestVerifyCache checks that a token verified before is not taken past
// its exp, nor once its key has left the set.
func TestVerifyCache(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.RS256)
	clk := &clock{}
	v := newVerifier(t, iss, clk, nil)
	short := iss.Token(t, "k1", "alice", aud, nil) // exp in a minute
	mustVerify(t, v, short)
	mustVerify(t, v, short)
	clk.advance(time.Minute + oauth.Leeway + time.Second)
	mustRefuse(t, v, short, "a remembered token past its exp")

	day := long(t, iss, "k1", "bob")
	mustVerify(t, v, day)
	// The issuer drops k1; once the keys are stale the next request
	// fetches them, and the remembered token no longer passes.
	iss.AddKey(t, "k2", jose.ES256)
	iss.Unpublish("k1")
	mustVerify(t, v, day) // the keys held are still fresh
	clk.advance(2 * time.Hour)
	// Stale, they keep serving until the refresh the next token starts
	// lands; then the remembered token no longer passes.
	wait.Until(t, 10*time.Second, "a remembered token whose key left the set refused", func() bool {
		_, err := v.Verify(context.Background(), day)
		return errors.Is(err, oauth.ErrInvalidToken)
	})
	if id := mustVerify(t, v, long(t, iss, "k2", "carol")); id.Principal != "carol" {
		t.Errorf("the new key's token: %+v", id)
	}
}

// TestVerifyIssuerHangs checks issue 39 item 4.2: a key set endpoint that
// hangs never stalls the tokens of the keys held. Stale keys are
// refreshed in the background and serve meanwhile; a token of an unknown
// key waits for the hung fetch at most UnknownKeyWait, then is refused;
// once the issuer answers, its new key verifies.
func TestVerifyIssuerHangs(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	clk := &clock{}
	v := newVerifier(t, iss, clk, nil)
	alice := long(t, iss, "k1", "alice")
	mustVerify(t, v, alice)
	iss.SetHang(true)
	clk.advance(2 * time.Hour) // past Refresh
	// Well under FetchTimeout, which a request waited before.
	const quick = oauth.FetchTimeout / 2
	for _, token := range []string{alice, long(t, iss, "k1", "bob"), alice} {
		start := time.Now()
		mustVerify(t, v, token)
		if d := time.Since(start); d > quick {
			t.Fatalf("a token of a held key took %s while the issuer hangs, want under %s", d, quick)
		}
	}
	wait.Until(t, 10*time.Second, "the background refresh reaches the issuer", func() bool { return iss.Fetches() == 2 })

	iss.AddKey(t, "k2", jose.ES256)
	carol := long(t, iss, "k2", "carol")
	start := time.Now()
	mustRefuse(t, v, carol, "a key the hung issuer has not served")
	if d := time.Since(start); d > oauth.UnknownKeyWait+quick/2 {
		t.Errorf("a token of an unknown key waited %s for the hung issuer, want at most about %s", d, oauth.UnknownKeyWait)
	}
	if n := iss.Fetches(); n != 2 {
		t.Errorf("fetches while one hangs: %d, want 2", n)
	}

	iss.SetHang(false)
	clk.advance(time.Minute)
	wait.Until(t, 20*time.Second, "the new key verifying once the issuer answers", func() bool {
		id, err := v.Verify(context.Background(), carol)
		return err == nil && id.Principal == "carol"
	})
}
