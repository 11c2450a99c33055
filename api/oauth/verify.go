package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// ErrInvalidToken is what Verify returns (wrapped, with the reason) for
// a token it does not accept.
var ErrInvalidToken = errors.New("invalid access token")

// Identity is what an accepted token says about its bearer.
type Identity struct {
	// Principal is the value of the principal claim.
	Principal string
	// Tools is the token's tool allow-list; nil with AllTools.
	Tools []string
	// AllTools is true when the token may call every tool: no tools
	// claim is configured, or the claim lists "*".
	AllTools bool
	// Expiry is the token's exp.
	Expiry time.Time
}

// Verifier verifies access tokens of one issuer. It is safe for
// concurrent use.
type Verifier struct {
	cfg   Config
	keys  *keySet
	cache *tokenCache
}

// New returns a verifier for c. It fetches nothing until the first token.
func New(c Config) (*Verifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	return &Verifier{cfg: c, keys: newKeySet(c), cache: newTokenCache()}, nil
}

// Issuer is the configured issuer.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// LooksLikeJWT reports whether token has the shape of a signed JWT (three
// dot-separated parts), so that a static token is never sent to Verify.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}

// Verify checks a JWT access token and returns its bearer's identity; an
// error wraps ErrInvalidToken with the reason (which names no secret). A
// token verified before under the same keys is not verified again while
// its exp and nbf allow it.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	v.keys.refreshIfStale(ctx)
	sum, gen, now := sha256.Sum256([]byte(token)), v.keys.generation(), v.cfg.Now()
	if id, ok := v.cache.get(sum, gen, now); ok {
		return id, nil
	}
	id, notBefore, err := v.verify(ctx, token, now)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	v.cache.put(sum, verified{id: id, notBefore: notBefore, gen: gen})
	return id, nil
}

// verify checks token at now, returning its identity and nbf (zero for
// none).
func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (Identity, time.Time, error) {
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	if len(tok.Headers) != 1 {
		return Identity{}, time.Time{}, errors.New("not one signature")
	}
	h := tok.Headers[0]
	keys, err := v.keys.candidates(ctx, h.KeyID, jose.SignatureAlgorithm(h.Algorithm))
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	var (
		std    jwt.Claims
		claims map[string]any
	)
	verified := false
	for _, key := range keys {
		if err = tok.Claims(key.key, &std, &claims); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, time.Time{}, err
	}
	if std.Expiry == nil {
		return Identity{}, time.Time{}, errors.New("no exp claim")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: now}, Leeway); err != nil {
		return Identity{}, time.Time{}, err
	}
	principal, ok := claims[v.cfg.PrincipalClaim].(string)
	switch {
	case !ok || principal == "":
		return Identity{}, time.Time{}, fmt.Errorf("no string claim %q (the principal)", v.cfg.PrincipalClaim)
	case len(principal) > MaxPrincipalBytes:
		return Identity{}, time.Time{}, fmt.Errorf("claim %q is longer than %d bytes", v.cfg.PrincipalClaim, MaxPrincipalBytes)
	}
	id := Identity{Principal: principal, Expiry: std.Expiry.Time()}
	var notBefore time.Time
	if std.NotBefore != nil {
		notBefore = std.NotBefore.Time()
	}
	if v.cfg.ToolsClaim == "" {
		id.AllTools = true
		return id, notBefore, nil
	}
	if id.Tools, err = toolsOf(claims[v.cfg.ToolsClaim]); err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("claim %q: %w", v.cfg.ToolsClaim, err)
	}
	if slices.Contains(id.Tools, "*") {
		id.Tools, id.AllTools = nil, true
	}
	return id, notBefore, nil
}

// toolsOf reads a tools claim: absent is no tool; an array of strings; or
// one string of space-separated names (as OAuth's scope).
func toolsOf(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return []string{}, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		tools := make([]string, 0, len(v))
		for _, t := range v {
			s, ok := t.(string)
			if !ok {
				return nil, fmt.Errorf("holds a %T, not a string", t)
			}
			tools = append(tools, s)
		}
		return tools, nil
	}
	return nil, fmt.Errorf("is a %T, neither a string nor an array of strings", v)
}
