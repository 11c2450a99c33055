package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// AdminPrincipal is the principal of the admin token.
const AdminPrincipal = "admin"

// AnonymousPrincipal is every caller's principal when auth is off.
const AnonymousPrincipal = "anonymous"

// Token maps a bearer token to a principal and the tools it may call.
type Token struct {
	Principal string
	// Secret is the bearer token itself.
	Secret string
	// Tools lists the tools the principal may call; "*" allows all.
	Tools []string
}

// Auth configures authentication. It is on when any token is set; off,
// every caller is AnonymousPrincipal with admin rights.
type Auth struct {
	Tokens     []Token
	AdminToken string
}

// Enabled reports whether callers must present a token.
func (a Auth) Enabled() bool { return len(a.Tokens) > 0 || a.AdminToken != "" }

// Validate reports tokens that cannot work: empty secrets or principals,
// a secret used twice, a principal named like the admin or anonymous.
func (a Auth) Validate() error {
	seen := make(map[string]string)
	check := func(principal, secret string) error {
		if secret == "" {
			return fmt.Errorf("auth: token of %q is empty", principal)
		}
		if strings.TrimSpace(secret) != secret {
			return fmt.Errorf("auth: token of %q has leading or trailing white space", principal)
		}
		if other, dup := seen[secret]; dup {
			return fmt.Errorf("auth: %q and %q share a token", other, principal)
		}
		seen[secret] = principal
		return nil
	}
	if a.AdminToken != "" {
		if err := check(AdminPrincipal, a.AdminToken); err != nil {
			return err
		}
	}
	for _, t := range a.Tokens {
		switch {
		case t.Principal == "":
			return errors.New("auth: a token has no principal")
		case t.Principal == AdminPrincipal || t.Principal == AnonymousPrincipal:
			return fmt.Errorf("auth: principal name %q is reserved", t.Principal)
		}
		if err := check(t.Principal, t.Secret); err != nil {
			return err
		}
	}
	return nil
}

// identity is an authenticated caller and its tool allow-list.
type identity struct {
	caller   Caller
	allTools bool
	tools    map[string]bool
}

func (id *identity) mayCall(tool string) bool { return id.allTools || id.tools[tool] }

// authenticator resolves bearer tokens.
type authenticator struct {
	enabled bool
	// byHash maps SHA-256(token) to its identity, so a lookup compares
	// fixed-size digests rather than the secrets themselves.
	byHash map[[sha256.Size]byte]*identity
}

var anonymous = &identity{caller: Caller{Principal: AnonymousPrincipal, Admin: true}, allTools: true}

func newAuthenticator(a Auth) *authenticator {
	au := &authenticator{enabled: a.Enabled(), byHash: make(map[[sha256.Size]byte]*identity)}
	if a.AdminToken != "" {
		au.byHash[sha256.Sum256([]byte(a.AdminToken))] = &identity{
			caller: Caller{Principal: AdminPrincipal, Admin: true}, allTools: true,
		}
	}
	for _, t := range a.Tokens {
		id := &identity{caller: Caller{Principal: t.Principal}, tools: make(map[string]bool)}
		for _, name := range t.Tools {
			if name == "*" {
				id.allTools = true
			}
			id.tools[name] = true
		}
		au.byHash[sha256.Sum256([]byte(t.Secret))] = id
	}
	return au
}

// identify returns the caller behind a request, or UNAUTHORIZED.
func (au *authenticator) identify(r *http.Request) (*identity, error) {
	if !au.enabled {
		return anonymous, nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, newError(CodeUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	for h, id := range au.byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			return id, nil
		}
	}
	return nil, newError(CodeUnauthorized, "unknown bearer token")
}

const identityKey = "carmy.identity"

// authenticate is middleware that stores the caller's identity.
func (au *authenticator) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := au.identify(c.Request())
		if err != nil {
			return err
		}
		c.Set(identityKey, id)
		return next(c)
	}
}

func identityOf(c echo.Context) *identity {
	id, _ := c.Get(identityKey).(*identity)
	return id
}

// requireAdmin refuses callers without admin rights.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if id := identityOf(c); id == nil || !id.caller.Admin {
			return newError(CodeForbidden, "this endpoint needs the admin token")
		}
		return next(c)
	}
}
