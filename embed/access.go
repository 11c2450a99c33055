package embed

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/carmyhq/carmy/api"
)

// AccessConfig is the config file's `api` section: how clients reach the
// API. Each key has a setting (carmy serve's flag and variable), which
// wins when it is set.
type AccessConfig struct {
	// AllowedHosts are the Host names the API answers besides IP
	// addresses, localhost and the node's own names (--allowed-hosts).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TrustedProxies are the networks of reverse proxies whose
	// X-Forwarded-For is believed (--trusted-proxies).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// PublicURL is the base URL clients reach the node at (--public-url).
	PublicURL string `yaml:"public_url"`
}

// validate checks the section's values.
func (a AccessConfig) validate() error {
	if _, err := api.ParseAllowedHosts(strings.Join(a.AllowedHosts, ",")); err != nil {
		return fmt.Errorf("api.allowed_hosts: %w", err)
	}
	if _, err := api.ParseTrustedProxies(strings.Join(a.TrustedProxies, ",")); err != nil {
		return fmt.Errorf("api.trusted_proxies: %w", err)
	}
	if err := api.ValidatePublicURL(a.PublicURL); err != nil {
		return fmt.Errorf("api.public_url: %w", err)
	}
	return nil
}

// access is the API's access settings, from the settings or else the file.
type access struct {
	allowedHosts   []string
	trustedProxies []netip.Prefix
	publicURL      string
	// ownHosts are the node's own names: the host of Settings.HTTPAddr
	// (--http-addr).
	ownHosts []string
}

// resolveAccess returns the access settings: each setting (carmy serve's
// flag or its variable) when set, else the file's key. Both were
// validated.
func resolveAccess(cfg Settings, fc FileConfig) access {
	a := access{publicURL: fc.API.PublicURL}
	hosts, proxies := strings.Join(fc.API.AllowedHosts, ","), strings.Join(fc.API.TrustedProxies, ",")
	if cfg.AllowedHosts != "" {
		hosts = cfg.AllowedHosts
	}
	if cfg.TrustedProxies != "" {
		proxies = cfg.TrustedProxies
	}
	if cfg.PublicURL != "" {
		a.publicURL = cfg.PublicURL
	}
	a.allowedHosts, _ = api.ParseAllowedHosts(hosts)
	a.trustedProxies, _ = api.ParseTrustedProxies(proxies)
	if host, _, err := net.SplitHostPort(cfg.HTTPAddr); err == nil && host != "" {
		a.ownHosts = []string{host}
	}
	return a
}
