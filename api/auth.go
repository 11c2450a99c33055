package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/api/oauth"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// AdminPrincipal is the principal of the admin token.
const AdminPrincipal = "admin"

// MinTokenBytes is the shortest token `carmy serve` accepts from its
// config: 16 bytes, so that a token cannot be guessed at any rate (an
// address over its AuthFailures learns that a token is wrong from its 429
// as fast as it asks). Use random ones: `carmy keygen` prints 32 random
// bytes in base64, which serve as a token as they are. Auth.Validate does
// not enforce it (a library's tests may use short tokens), and a token
// given as a SHA-256 cannot be measured.
const MinTokenBytes = 16

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
	// MaxBytes is the most bytes the principal may hold (see
	// Caller.MaxBytes); 0 means Auth.MaxBytesPerPrincipal applies.
	// Negative is invalid.
	MaxBytes int64
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
	// MaxBytesPerPrincipal is the default of Caller.MaxBytes, as
	// MaxEntriesPerPrincipal is of MaxEntries: 0 means no per-principal
	// bound on bytes.
	MaxBytesPerPrincipal int64
	// MetricsToken, or its SHA-256 in hex MetricsTokenSHA256, when set,
	// is the bearer token GET /metrics needs (the admin token serves too);
	// unset, /metrics is open, like /healthz, so that Prometheus scrapes
	// it without configuration. It opens /metrics only, is no principal,
	// and does not turn auth on: with auth off it still guards /metrics.
	MetricsToken       string
	MetricsTokenSHA256 string
	// OAuth, when set, also accepts JWT access tokens of an OAuth
	// authorization server (package api/oauth), beside the tokens above:
	// its principal claim, under OAuthPrincipalPrefix, names the caller
	// (never a static token's principal), its tools claim (if
	// configured) is the allow-list, and the per-principal bounds apply.
	// Such a caller is never the admin. It turns auth on.
	OAuth *oauth.Config
}

// metricsPrincipal names the metrics token in errors and logs.
const metricsPrincipal = "metrics"

// Enabled reports whether callers must present a token.
func (a Auth) Enabled() bool {
	return len(a.Tokens) > 0 || a.AdminToken != "" || a.AdminTokenSHA256 != "" || a.OAuth != nil
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
// a secret used twice, a principal named like the admin or anonymous, or,
// with OAuth, beginning with OAuthPrincipalPrefix (the access tokens'
// namespace); and negative per-principal bounds.
func (a Auth) Validate() error {
	if a.MaxEntriesPerPrincipal < 0 {
		return fmt.Errorf("auth: negative MaxEntriesPerPrincipal %d", a.MaxEntriesPerPrincipal)
	}
	if a.MaxBytesPerPrincipal < 0 {
		return fmt.Errorf("auth: negative MaxBytesPerPrincipal %d", a.MaxBytesPerPrincipal)
	}
	if a.OAuth != nil {
		if err := a.OAuth.Validate(); err != nil {
			return err
		}
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
	if a.MetricsToken != "" || a.MetricsTokenSHA256 != "" {
		if err := check(metricsPrincipal, a.MetricsToken, a.MetricsTokenSHA256); err != nil {
			return err
		}
	}
	for _, t := range a.Tokens {
		switch {
		case t.Principal == "":
			return errors.New("auth: a token has no principal")
		case t.Principal == AdminPrincipal || t.Principal == engine.AnonymousPrincipal:
			return fmt.Errorf("auth: principal name %q is reserved", t.Principal)
		case a.OAuth != nil && strings.HasPrefix(t.Principal, OAuthPrincipalPrefix):
			return fmt.Errorf("auth: principal name %q begins with %q, which names the callers of OAuth access tokens", t.Principal, OAuthPrincipalPrefix)
		case t.MaxEntries < 0:
			return fmt.Errorf("auth: negative MaxEntries %d of %q", t.MaxEntries, t.Principal)
		case t.MaxBytes < 0:
			return fmt.Errorf("auth: negative MaxBytes %d of %q", t.MaxBytes, t.Principal)
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
	// metrics is the metrics token's digest, nil when /metrics is open.
	metrics *[sha256.Size]byte
	// guard counts failures per client address.
	guard *authGuard
	// jwt verifies OAuth access tokens; nil without Auth.OAuth.
	jwt *oauth.Verifier
	// maxEntries and maxBytes are the bounds of a caller of a JWT.
	maxEntries int
	maxBytes   int64
}

// newAuthenticator returns the authenticator of a, which Validate has
// accepted.
func newAuthenticator(a Auth, guard *authGuard, log *slog.Logger) (*authenticator, error) {
	au := &authenticator{
		maxEntries: a.MaxEntriesPerPrincipal,
		maxBytes:   a.MaxBytesPerPrincipal,
		enabled:    a.Enabled(),
		anonymous:  &engine.Caller{Principal: engine.AnonymousPrincipal, Admin: true, MaxEntries: a.MaxEntriesPerPrincipal, MaxBytes: a.MaxBytesPerPrincipal},
		byHash:     make(map[[sha256.Size]byte]*engine.Caller),
		guard:      guard,
	}
	if a.MetricsToken != "" || a.MetricsTokenSHA256 != "" {
		d, _ := digestOf(a.MetricsToken, a.MetricsTokenSHA256) // checked by Validate
		au.metrics = &d
	}
	if a.AdminToken != "" || a.AdminTokenSHA256 != "" {
		d, _ := digestOf(a.AdminToken, a.AdminTokenSHA256) // checked by Validate
		au.byHash[d] = &engine.Caller{Principal: AdminPrincipal, Admin: true, MaxEntries: a.MaxEntriesPerPrincipal, MaxBytes: a.MaxBytesPerPrincipal}
	}
	for _, t := range a.Tokens {
		maxEntries := t.MaxEntries
		if maxEntries == 0 {
			maxEntries = a.MaxEntriesPerPrincipal
		}
		maxBytes := t.MaxBytes
		if maxBytes == 0 {
			maxBytes = a.MaxBytesPerPrincipal
		}
		d, _ := digestOf(t.Secret, t.SecretSHA256) // checked by Validate
		au.byHash[d] = &engine.Caller{Principal: t.Principal, MaxEntries: maxEntries, MaxBytes: maxBytes, Tools: toolsOf(t)}
	}
	if a.OAuth != nil {
		c := *a.OAuth
		if c.Logger == nil {
			c.Logger = log
		}
		v, err := oauth.New(c)
		if err != nil {
			return nil, err
		}
		au.jwt = v
	}
	return au, nil
}

// toolsOf returns a token's allow-list as the runtime takes it: nil (every
// tool) when it lists "*".
func toolsOf(t Token) *engine.ToolSet {
	if slices.Contains(t.Tools, "*") {
		return nil
	}
	return engine.NewToolSet(t.Tools...)
}

// Reasons a presented credential failed, as logged (never the token).
const (
	reasonNotBearer = "Authorization is not a bearer token"
	reasonUnknown   = "unknown bearer token"
)

// errNoToken answers a request without credentials.
func errNoToken() error {
	return newError(store.CodeUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")
}

// bearerToken returns r's bearer token. presented is false
// when r has no Authorization header (UNAUTHORIZED, no guess); otherwise
// err is INVALID_REQUEST for two headers (which a proxy and this server
// might read differently) or UNAUTHORIZED, with the reason to log, for one
// that is not a bearer token.
func bearerToken(r *http.Request) (token string, presented bool, reason string, err error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", false, "", errNoToken()
	case 1:
	default:
		return "", true, "", invalidField("Authorization", "the Authorization header is given more than once: send one bearer token")
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", true, reasonNotBearer, errNoToken()
	}
	return token, true, "", nil
}

// lookup returns the caller whose token has digest sum, comparing every
// digest in constant time; nil for none.
func (au *authenticator) lookup(sum [sha256.Size]byte) *engine.Caller {
	var found *engine.Caller
	for h, id := range au.byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found = id
		}
	}
	return found
}

// admit reads r's bearer token and resolves it with resolve, which
// reports whether the token is a credential of the route and, when not,
// the reason to log. A token that resolves is admitted whatever its
// client address's failures (AuthFailures): the limit is on failed
// attempts only, so that a stale token in one client (a console page in
// the operator's browser) cannot lock out the others that share its
// address. Anything else — no Authorization, two of them, one that is not
// a bearer token, a token that does not resolve — is refused:
// RATE_LIMITED when the address is over its failures; else
// INVALID_REQUEST for two headers, or UNAUTHORIZED, counted as a failure
// of the address when a credential was presented. The token is always
// compared (resolve compares static tokens in constant time); an address
// over the limit learns no more of a wrong token than 429, and guessing
// stays out of reach at any rate for tokens of MinTokenBytes and more.
func (au *authenticator) admit(c echo.Context, resolve func(token string) (ok bool, reason string)) (token string, presented bool, err error) {
	r := c.Request()
	token, presented, reason, err := bearerToken(r)
	if err == nil {
		var ok bool
		if ok, reason = resolve(token); ok {
			return token, true, nil
		}
		err = newError(store.CodeUnauthorized, messageOf(reason))
	}
	src := au.guard.sourceOf(r)
	if limited := au.guard.check(src, r.URL.Path, c.Response().Header()); limited != nil {
		return token, presented, limited
	}
	if presented && reason != "" {
		au.guard.fail(src, reason, r.URL.Path)
	}
	return token, presented, err
}

// identify returns the caller behind a request: the anonymous caller with
// auth off; else the caller of its bearer token, admitted as admit says
// (RATE_LIMITED, INVALID_REQUEST or UNAUTHORIZED otherwise). With OAuth,
// a token that no static token matches and that has a JWT's shape is
// verified as an access token.
func (au *authenticator) identify(c echo.Context) (*engine.Caller, error) {
	if !au.enabled {
		return au.anonymous, nil
	}
	var id *engine.Caller
	_, _, err := au.admit(c, func(token string) (bool, string) {
		var reason string
		id, reason = au.resolve(c.Request().Context(), token)
		return id != nil, reason
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

const callerKey = "carmy.caller"

// authenticate is middleware that stores the caller.
func (au *authenticator) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := au.identify(c)
		if err != nil {
			return err
		}
		c.Set(callerKey, id)
		return next(c)
	}
}

// authenticateMetrics is the middleware of GET /metrics: open without a
// metrics token; with one, it or the admin token is needed, admitted as
// identify admits (the same failures per address); another principal's
// token is FORBIDDEN.
func (au *authenticator) authenticateMetrics(next echo.HandlerFunc) echo.HandlerFunc {
	if au.metrics == nil {
		return next
	}
	return func(c echo.Context) error {
		var id *engine.Caller
		_, _, err := au.admit(c, func(token string) (bool, string) {
			if sum := sha256.Sum256([]byte(token)); subtle.ConstantTimeCompare(au.metrics[:], sum[:]) == 1 {
				return true, ""
			}
			var reason string
			id, reason = au.resolve(c.Request().Context(), token)
			return id != nil, reason
		})
		switch {
		case err != nil:
			return err
		case id != nil && !(id.Principal == AdminPrincipal && id.Admin):
			return newError(store.CodeForbidden, "GET /metrics needs the metrics token or the admin token")
		}
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
