package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/carmyhq/carmy/internal/egress"
)

// ApprovalNotify is a gated tool's webhook (docs/policy.md#the-notify-webhook):
// when a call of the tool is reserved awaiting approval, the node that
// reserved it POSTs an ApprovalNotice to URL, retrying until a 2xx answer
// or the gate's expiry, once per execution. Delivery is at least once
// while the node lives (the Idempotency-Key header, the execution_id,
// tells a receiver's retries apart) and may be lost when the node stops
// or its queue is full (NotifyDropped).
type ApprovalNotify struct {
	// URL receives the POST: an absolute http or https URL.
	URL string
	// AllowNetworks, when not empty, lists the only networks the URL's
	// host may resolve into (the egress policy, as HTTPTool's); the
	// built-in deny list applies in any case.
	AllowNetworks []netip.Prefix
	// Client, when set with a Transport, sends the notifications: its
	// Transport then replaces the egress policy's. Redirects are never
	// followed.
	Client *http.Client

	// client and shown are set by checkNotify: the client that sends,
	// and the URL for a log line (no userinfo or query).
	client *http.Client
	shown  string
}

// ApprovalNotice is the body of a notification: who called what, and
// until when it may be decided. Nothing of the call's arguments.
type ApprovalNotice struct {
	ExecutionID string    `json:"execution_id"`
	Tool        string    `json:"tool"`
	Principal   string    `json:"principal"`
	SessionID   string    `json:"session_id"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// The results of notifications, as NotifyObserver counts them.
const (
	NotifySent    = "sent"    // a 2xx answer
	NotifyFailed  = "failed"  // an attempt that failed (no answer, or not 2xx); tried again
	NotifyGaveUp  = "gave_up" // the gate expired, or this node stopped, before a 2xx
	NotifyDropped = "dropped" // not queued: MaxPendingNotifications were pending
)

// NotifyObserver is implemented by Observers that also count approval
// notifications, by result (NotifySent, NotifyFailed, NotifyGaveUp,
// NotifyDropped).
type NotifyObserver interface {
	ApprovalNotified(result string)
}

// checkNotify validates n and returns a copy ready to send: an absolute
// http or https URL whose host, when it is an IP address, the egress
// policy allows (a name is checked on every address it resolves to, when
// connecting), unless n.Client brings a Transport of its own. An error
// never repeats the URL's userinfo or query.
func checkNotify(n *ApprovalNotify) (*ApprovalNotify, error) {
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("approval: notify: the url is not an absolute http or https URL")
	}
	c := *n
	c.AllowNetworks = slices.Clone(n.AllowNetworks)
	c.shown = egress.RedactURL(u)
	client := http.Client{}
	if n.Client != nil {
		client = *n.Client
	}
	if client.Transport == nil {
		policy, err := egress.New(n.AllowNetworks)
		if err != nil {
			return nil, fmt.Errorf("approval: notify: %w", err)
		}
		if addr, err := netip.ParseAddr(u.Hostname()); err == nil {
			var denied *egress.DeniedError
			if err := policy.Check(addr); errors.As(err, &denied) {
				return nil, fmt.Errorf("approval: notify: url %s: its host %s is %s: the egress policy does not allow it", c.shown, u.Hostname(), denied.Reason)
			}
		}
		client.Transport = policy.Transport()
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.client = &client
	return &c, nil
}

// Check reports what AddTool would refuse in n (checkNotify): a URL that
// is not an absolute http or https URL, or whose IP host the egress
// policy refuses. A config loader calls it to refuse a webhook at load.
func (n ApprovalNotify) Check() error {
	_, err := checkNotify(&n)
	return err
}

// String is the webhook for an operator's eyes: its URL without
// userinfo or query, where secrets are usually put.
func (n ApprovalNotify) String() string {
	if n.shown != "" {
		return n.shown
	}
	u, err := url.Parse(n.URL)
	if err != nil {
		return "[unparsable url]"
	}
	return egress.RedactURL(u)
}

// MarshalJSON writes the webhook as String does ({"url": …}), so that a
// tool's description (ToolInfo) never carries the URL's secrets.
func (n ApprovalNotify) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"url": n.String()})
}
