package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// DefaultUserAgent is the User-Agent header unless WithUserAgent says
// otherwise.
const DefaultUserAgent = "carmy-go-client/1"

// Client talks to one Carmy node (or a load balancer in front of a
// cluster: every node serves the whole API). It is safe for concurrent
// use.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	hc    *http.Client
	token string
	ua    string
	retry RetryPolicy
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sets the http.Client the requests go through, for
// instance one whose Transport trusts a private CA for an https:// base
// URL. Its Timeout, when set, bounds each attempt. The default is a client
// of its own over http.DefaultTransport, without timeout: the context
// bounds a request.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetry sets the retry policy (DefaultRetryPolicy unless set; zero
// fields take the default's values; NoRetry disables retries).
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithUserAgent sets the User-Agent header (DefaultUserAgent unless set).
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// New returns a client of the node at baseURL: "http://host:port" or
// "https://host:port", optionally with a path prefix under which a proxy
// serves the API ("https://gw.example/carmy"). It does not contact the
// node.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("carmy: base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("carmy: base URL %q: the scheme must be http or https", baseURL)
	case u.Host == "":
		return nil, fmt.Errorf("carmy: base URL %q has no host", baseURL)
	case u.User != nil:
		return nil, fmt.Errorf("carmy: base URL %q: give credentials with WithToken, not in the URL", baseURL)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("carmy: base URL %q must have no query or fragment", baseURL)
	}
	c := &Client{
		base:  strings.TrimRight(u.String(), "/"),
		hc:    &http.Client{},
		ua:    DefaultUserAgent,
		retry: DefaultRetryPolicy,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.hc == nil {
		return nil, errors.New("carmy: WithHTTPClient(nil)")
	}
	if strings.ContainsAny(c.token, "\r\n") {
		return nil, errors.New("carmy: the token contains a line break")
	}
	if c.retry, err = c.retry.normalized(); err != nil {
		return nil, fmt.Errorf("carmy: retry policy: %w", err)
	}
	return c, nil
}

// BaseURL returns the base URL requests go to, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }
