package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// AdminPrincipal is the principal of the admin token.
const AdminPrincipal = "admin"

// Token maps a bearer token to a principal and the tools it may call.
type Token struct {
	Principal string
	// Secret is the bearer token itself; or give SecretSHA256 instead.
	Secret string
	// SecretSHA256 is the lowercase hex SHA-256 of the bearer token, so a
	// config file need not hold the secret (printf %s "$TOKEN" | sha256sum).
	SecretSHA256 string
	// Tools lists the tools the principal may call; "*" allows all.
	Tools []string
	// MaxEntries is the most records the principal may hold (see
	// Caller.MaxEntries); 0 means Auth.MaxEntriesPerPrincipal applies.
	// Negative is invalid.
	MaxEntries int
}

// Auth configures authentication. It is on when any token is set; off,
// every caller is engine.AnonymousPrincipal with admin rights.
type Auth struct {
	Tokens     []Token
	AdminToken string
	// AdminTokenSHA256 is the admin token's SHA-256 in hex, instead of
	// AdminToken.
	AdminTokenSHA256 string
	// MaxEntriesPerPrincipal is the default of Caller.MaxEntries: it
	// bounds every principal whose token sets no MaxEntries of its own,
	// the admin and, with auth off, the anonymous caller included. 0 means
	// no per-principal bound. It does not turn auth on. Negative is
	// invalid.
	MaxEntriesPerPrincipal int
}

// Enabled reports whether callers must present a token.
func (a Auth) Enabled() bool {
	return len(a.Tokens) > 0 || a.AdminToken != "" || a.AdminTokenSHA256 != ""
}

// digestOf returns the SHA-256 a token is known by: of secret, or the
// given hex digest.
func digestOf(secret, hexDigest string) ([sha256.Size]byte, error) {
	if hexDigest == "" {
		return sha256.Sum256([]byte(secret)), nil
	}
	var d [sha256.Size]byte
	b, err := hex.DecodeString(hexDigest)
	if err != nil || len(b) != sha256.Size || strings.ToLower(hexDigest) != hexDigest {
		return d, fmt.Errorf("not 64 lowercase hex digits")
	}
	copy(d[:], b)
	return d, nil
}

// Validate reports tokens that cannot work: empty secrets or principals,
// a secret used twice, a principal named like the admin or anonymous; and
// negative per-principal bounds.
func (a Auth) Validate() error {
	if a.MaxEntriesPerPrincipal < 0 {
		return fmt.Errorf("auth: negative MaxEntriesPerPrincipal %d", a.MaxEntriesPerPrincipal)
	}
	seen := make(map[[sha256.Size]byte]string)
	check := func(principal, secret, hexDigest string) error {
		switch {
		case secret != "" && hexDigest != "":
			return fmt.Errorf("auth: token of %q is given both as a secret and as a SHA-256", principal)
		case secret == "" && hexDigest == "":
			return fmt.Errorf("auth: token of %q is empty", principal)
		case strings.TrimSpace(secret) != secret:
			return fmt.Errorf("auth: token of %q has leading or trailing white space", principal)
		}
		d, err := digestOf(secret, hexDigest)
		if err != nil {
			return fmt.Errorf("auth: SHA-256 of the token of %q: %w", principal, err)
		}
		if other, dup := seen[d]; dup {
			return fmt.Errorf("auth: %q and %q share a token", other, principal)
		}
		seen[d] = principal
		return nil
	}
	if a.AdminToken != "" || a.AdminTokenSHA256 != "" {
		if err := check(AdminPrincipal, a.AdminToken, a.AdminTokenSHA256); err != nil {
			return err
		}
	}
	for _, t := range a.Tokens {
		switch {
		case t.Principal == "":
			return errors.New("auth: a token has no principal")
		case t.Principal == AdminPrincipal || t.Principal == engine.AnonymousPrincipal:
			return fmt.Errorf("auth: principal name %q is reserved", t.Principal)
		case t.MaxEntries < 0:
			return fmt.Errorf("auth: negative MaxEntries %d of %q", t.MaxEntries, t.Principal)
		}
		if err := check(t.Principal, t.Secret, t.SecretSHA256); err != nil {
			return err
		}
	}
	return nil
}

// authenticator resolves bearer tokens into callers. A caller carries
// its tool allow-list (engine.Caller.Tools), which the runtime enforces.
type authenticator struct {
	enabled bool
	// anonymous is every caller when auth is off.
	anonymous *engine.Caller
	// byHash maps SHA-256(token) to its caller, so a lookup compares
	// fixed-size digests rather than the secrets themselves.
	byHash map[[sha256.Size]byte]*engine.Caller
}

func newAuthenticator(a Auth) *authenticator {
	au := &authenticator{
		enabled:   a.Enabled(),
		anonymous: &engine.Caller{Principal: engine.AnonymousPrincipal, Admin: true, MaxEntries: a.MaxEntriesPerPrincipal},
		byHash:    make(map[[sha256.Size]byte]*engine.Caller),
	}
	if a.AdminToken != "" || a.AdminTokenSHA256 != "" {
		d, _ := digestOf(a.AdminToken, a.AdminTokenSHA256) // checked by Validate
		au.byHash[d] = &engine.Caller{Principal: AdminPrincipal, Admin: true, MaxEntries: a.MaxEntriesPerPrincipal}
	}
	for _, t := range a.Tokens {
		maxEntries := t.MaxEntries
		if maxEntries == 0 {
			maxEntries = a.MaxEntriesPerPrincipal
		}
		d, _ := digestOf(t.Secret, t.SecretSHA256) // checked by Validate
		au.byHash[d] = &engine.Caller{Principal: t.Principal, MaxEntries: maxEntries, Tools: toolsOf(t)}
	}
	return au
}

// toolsOf returns a token's allow-list as the runtime takes it: nil (every
// tool) when it lists "*".
func toolsOf(t Token) *engine.ToolSet {
	if slices.Contains(t.Tools, "*") {
		return nil
	}
	return engine.NewToolSet(t.Tools...)
}

// identify returns the caller behind a request, or UNAUTHORIZED.
func (au *authenticator) identify(r *http.Request) (*engine.Caller, error) {
	if !au.enabled {
		return au.anonymous, nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, newError(store.CodeUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	for h, id := range au.byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			return id, nil
		}
	}
	return nil, newError(store.CodeUnauthorized, "unknown bearer token")
}

const callerKey = "carmy.caller"

// authenticate is middleware that stores the caller.
func (au *authenticator) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := au.identify(c.Request())
		if err != nil {
			return err
		}
		c.Set(callerKey, id)
		return next(c)
	}
}

// callerOf returns the caller authenticate stored, nil on a route
// without authentication.
func callerOf(c echo.Context) *engine.Caller {
	caller, _ := c.Get(callerKey).(*engine.Caller)
	return caller
}

// requireAdmin refuses callers without admin rights.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if caller := callerOf(c); caller == nil || !caller.Admin {
			return newError(store.CodeForbidden, "this endpoint needs the admin token")
		}
		return next(c)
	}
}
