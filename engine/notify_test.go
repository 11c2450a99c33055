package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// receiver is a webhook on 127.0.0.1 that records what it is sent and
// answers each request with the next of its statuses (then 204).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	keys     []string
	statuses []int
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	rc := &receiver{statuses: statuses}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.bodies = append(rc.bodies, string(body))
		rc.keys = append(rc.keys, r.Header.Get("Idempotency-Key"))
		status := http.StatusNoContent
		if len(rc.statuses) > 0 {
			status, rc.statuses = rc.statuses[0], rc.statuses[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() ([]string, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bodies...), append([]string(nil), rc.keys...)
}

// notifyCounts counts ApprovalNotified by result.
type notifyCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *notifyCounts) ToolFinished(string, store.Status, time.Duration) {}
func (c *notifyCounts) StoreWrite(string, string, time.Duration)         {}
func (c *notifyCounts) ApprovalNotified(result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[result]++
}

func (c *notifyCounts) get(result string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[result]
}

// gatedNotifying is a runtime whose tool "pay" needs approval within
// expires and notifies url.
func gatedNotifying(t *testing.T, url string, expires time.Duration) (*engine.Runtime, *notifyCounts) {
	counts := &notifyCounts{}
	app := newApp(t, engine.WithObserver(counts))
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "pay", Func: c.fn,
		Approval: &engine.Approval{Approvers: []string{"bob"}, ExpiresAfter: expires, Notify: &engine.ApprovalNotify{URL: url}}})
	return app, counts
}

// settled waits until app holds no pending notification: every one
// queued has been sent or given up.
func settled(t *testing.T, app *engine.Runtime) {
	t.Helper()
	wait.Until(t, 30*time.Second, "no approval notification pending", func() bool { return engine.PendingNotifications(app) == 0 })
}

// TestApprovalNotifySentOnce: a gated call's reservation is notified
// once, with the execution, tool, principal, session and expiry and
// nothing of the arguments; retries of the call send nothing more.
func TestApprovalNotifySentOnce(t *testing.T) {
	rc := newReceiver(t)
	app, counts := gatedNotifying(t, rc.URL+"/hook?token=s3cret", time.Hour)
	req := engine.Request{Tool: "pay", RequestID: "n-1", SessionID: "s-1", Arguments: json.RawMessage(`{"card":"4111-secret"}`)}
	first := call(t, app, req)
	if !first.Awaiting {
		t.Fatalf("gated call: %+v, want awaiting", first)
	}
	for range 3 {
		if again := call(t, app, req); !again.Awaiting || again.Record.ExecutionID != first.Record.ExecutionID {
			t.Fatalf("retry: %+v", again)
		}
	}
	wait.Until(t, 30*time.Second, "the notification", func() bool { b, _ := rc.got(); return len(b) > 0 })
	settled(t, app)
	bodies, keys := rc.got()
	if len(bodies) != 1 || counts.get(engine.NotifySent) != 1 {
		t.Fatalf("notifications %q (sent counted %d), want one", bodies, counts.get(engine.NotifySent))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"execution_id": first.Record.ExecutionID, "tool": "pay", "principal": "alice", "session_id": "s-1",
		"expires_at": first.Record.Approval.ExpiresAt.Format(time.RFC3339Nano)}
	if len(got) != len(want) {
		t.Errorf("notification %s, want exactly the keys of %v", bodies[0], want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("notification %s: %s = %v, want %v", bodies[0], k, got[k], v)
		}
	}
	if strings.Contains(bodies[0], "4111") || keys[0] != first.Record.ExecutionID {
		t.Errorf("notification %s with Idempotency-Key %q: want no argument and the execution id as key", bodies[0], keys[0])
	}
}

// TestApprovalNotifyRetried: a receiver that answers 500 is sent the same
// notification again (a second later) until it answers 2xx; one that
// never does is given up when the gate would expire before the next try.
func TestApprovalNotifyRetried(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, http.StatusInternalServerError)
	app, counts := gatedNotifying(t, rc.URL, time.Hour)
	call(t, app, engine.Request{Tool: "pay", RequestID: "r-1"})
	wait.Until(t, 30*time.Second, "the retried notification", func() bool { b, _ := rc.got(); return len(b) >= 2 })
	settled(t, app)
	bodies, _ := rc.got()
	if len(bodies) != 2 || bodies[0] != bodies[1] || counts.get(engine.NotifyFailed) != 1 || counts.get(engine.NotifySent) != 1 {
		t.Errorf("bodies %q, failed %d, sent %d: want the same notification twice, one failure and one sent",
			bodies, counts.get(engine.NotifyFailed), counts.get(engine.NotifySent))
	}

	always := newReceiver(t, 500, 500, 500, 500, 500)
	app, counts = gatedNotifying(t, always.URL, time.Second)
	call(t, app, engine.Request{Tool: "pay", RequestID: "r-2"})
	settled(t, app)
	if counts.get(engine.NotifyGaveUp) != 1 || counts.get(engine.NotifySent) != 0 {
		t.Errorf("a receiver that always fails: gave_up %d, sent %d; want 1 and 0", counts.get(engine.NotifyGaveUp), counts.get(engine.NotifySent))
	}
}

// TestApprovalNotifyURLChecked: a webhook URL that is not http(s), or
// whose IP host the egress policy refuses, is refused when the tool is
// added, without repeating the URL's secrets.
func TestApprovalNotifyURLChecked(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		allow     []netip.Prefix
		want      string
	}{
		{"not http", "ftp://127.0.0.1/x?token=s3cret", nil, "not an absolute http or https URL"},
		{"relative", "/hook", nil, "not an absolute http or https URL"},
		{"metadata", "http://169.254.169.254/latest?token=s3cret", nil, "is a cloud metadata address: the egress policy does not allow it"},
		{"outside allow", "http://127.0.0.1:9/x", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "outside the allowed networks"},
	} {
		app := newApp(t)
		err := app.AddTool(engine.ToolSpec{Name: "pay", Func: (&counter{}).fn,
			Approval: &engine.Approval{Notify: &engine.ApprovalNotify{URL: tc.url, AllowNetworks: tc.allow}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: AddTool = %v, want an error with %q and no secret", tc.name, err, tc.want)
		}
	}
	app := newApp(t)
	if err := app.AddTool(engine.ToolSpec{Name: "pay", Func: (&counter{}).fn,
		Approval: &engine.Approval{Notify: &engine.ApprovalNotify{URL: "https://u:pw-s3cret@hooks.example.com/carmy?token=s3cret"}}}); err != nil {
		t.Errorf("a name's URL: %v", err)
	}
	// Described, the tool shows its webhook without the URL's secrets.
	raw, err := json.Marshal(app.Tools())
	if err != nil || strings.Contains(string(raw), "s3cret") || !strings.Contains(string(raw), "hooks.example.com/carmy") {
		t.Errorf("the tools described: %s, %v", raw, err)
	}
}

// TestApprovalNotifyBounded: with MaxPendingNotifications pending (a
// receiver that never answers), the next gated call is answered all the
// same and its notification dropped and counted; the node holds no more.
func TestApprovalNotifyBounded(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() { close(release) })
	app, counts := gatedNotifying(t, hook.URL, time.Hour)
	for i := range engine.MaxPendingNotifications {
		call(t, app, engine.Request{Tool: "pay", RequestID: "b-" + strconv.Itoa(i)})
	}
	if n := engine.PendingNotifications(app); n != engine.MaxPendingNotifications {
		t.Fatalf("%d pending, want %d", n, engine.MaxPendingNotifications)
	}
	if resp := call(t, app, engine.Request{Tool: "pay", RequestID: "b-last"}); !resp.Awaiting {
		t.Fatalf("the call past the bound: %+v", resp)
	}
	if counts.get(engine.NotifyDropped) != 1 || engine.PendingNotifications(app) != engine.MaxPendingNotifications {
		t.Errorf("dropped %d, pending %d: want 1 and %d", counts.get(engine.NotifyDropped), engine.PendingNotifications(app), engine.MaxPendingNotifications)
	}
	wait.Until(t, 30*time.Second, "the receiver to hold its most requests at once", func() bool { return arrived.Load() >= 8 })
	if n := arrived.Load(); n > 8 {
		t.Errorf("%d requests at once, want at most 8", n)
	}
}
