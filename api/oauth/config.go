package oauth

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultPrincipalClaim     = "sub"
	DefaultRefresh            = 10 * time.Minute
	DefaultMinRefreshInterval = 30 * time.Second
	// Leeway is how far exp, nbf and iat may be off the local clock.
	Leeway = 30 * time.Second
	// FetchTimeout bounds one fetch of the key set, and the wait of a
	// token that finds no key held (before the first fetch succeeds).
	FetchTimeout = 10 * time.Second
	// UnknownKeyWait bounds the wait of a token whose key id the keys
	// held lack for the fetch it causes (or finds running): past it the
	// token is refused, and the fetch goes on in the background.
	UnknownKeyWait = 2 * time.Second
	// MaxKeySetBytes bounds the key set document.
	MaxKeySetBytes = 1 << 20
	// MaxPrincipalBytes bounds a principal taken from a token, as a
	// request_id is bounded.
	MaxPrincipalBytes = 255
)

// Config names the authorization server whose access tokens are
// accepted. The field comments give the config file's keys
// (auth.oauth.*).
type Config struct {
	// Issuer (issuer) is the authorization server's issuer identifier:
	// a token's iss must equal it exactly. An https URL (http only on a
	// loopback address). The protected-resource metadata document names
	// it in authorization_servers.
	Issuer string
	// Audience (audience) must be one of a token's aud values: the name
	// the authorization server gives this service (often its /mcp URL).
	Audience string
	// JWKSURL (jwks_url) is where the issuer publishes its signing keys
	// (a JWK Set): an https URL, http only on a loopback address.
	JWKSURL string
	// PrincipalClaim (principal_claim) is the claim whose string value is
	// the caller's principal (default "sub").
	PrincipalClaim string
	// ToolsClaim (tools_claim), when set, is the claim listing the tools
	// the token may call: an array of strings or one space-separated
	// string (as "scope" is); "*" allows every tool; a token without the
	// claim may call none. Unset, every token may call every tool.
	ToolsClaim string
	// Refresh (refresh) is how old the cached keys may grow before they
	// are fetched again (default DefaultRefresh).
	Refresh time.Duration
	// MinRefreshInterval is the least time between two fetches that a
	// token with an unknown key id (or a failed fetch) may cause (default
	// DefaultMinRefreshInterval), so that made-up key ids cannot turn the
	// node against the issuer.
	MinRefreshInterval time.Duration
	// HTTPClient fetches the key set (nil: a client of its own that
	// follows no redirects).
	HTTPClient *http.Client
	// Logger logs failed fetches (nil: slog.Default()).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now); for tests.
	Now func() time.Time
}

// withDefaults returns c with its zero fields defaulted.
func (c Config) withDefaults() Config {
	if c.PrincipalClaim == "" {
		c.PrincipalClaim = DefaultPrincipalClaim
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout: FetchTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a config that cannot work, naming the config file's
// key (auth.oauth.<key>).
func (c Config) Validate() error {
	if err := checkURL("issuer", c.Issuer); err != nil {
		return err
	}
	if strings.TrimSpace(c.Audience) == "" {
		return fmt.Errorf("auth.oauth.audience: required (the aud value the issuer gives this service's tokens)")
	}
	if err := checkURL("jwks_url", c.JWKSURL); err != nil {
		return err
	}
	if c.PrincipalClaim != "" && strings.TrimSpace(c.PrincipalClaim) != c.PrincipalClaim {
		return fmt.Errorf("auth.oauth.principal_claim: %q has white space around it", c.PrincipalClaim)
	}
	if c.ToolsClaim != "" && strings.TrimSpace(c.ToolsClaim) != c.ToolsClaim {
		return fmt.Errorf("auth.oauth.tools_claim: %q has white space around it", c.ToolsClaim)
	}
	if c.Refresh < 0 || (c.Refresh > 0 && c.Refresh < time.Second) {
		return fmt.Errorf("auth.oauth.refresh: %s is below 1s", c.Refresh)
	}
	if c.MinRefreshInterval < 0 {
		return fmt.Errorf("auth.oauth: negative MinRefreshInterval %s", c.MinRefreshInterval)
	}
	return nil
}

// checkURL requires an absolute https URL, or http on a loopback host.
func checkURL(key, raw string) error {
	if raw == "" {
		return fmt.Errorf("auth.oauth.%s: required", key)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("auth.oauth.%s: %w", key, err)
	}
	switch {
	case u.Host == "" || u.User != nil || u.Fragment != "":
		return fmt.Errorf("auth.oauth.%s: %q is not an absolute URL without user info or fragment", key, raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("auth.oauth.%s: %q must be an https URL (http only on a loopback address)", key, raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
