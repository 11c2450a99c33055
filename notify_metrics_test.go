package carmy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestApprovalNotificationsMetric: a gated call answered 202 over HTTP
// is notified to the tool's webhook, and GET /metrics counts it in
// carmy_approval_notifications_total{result="sent"} (the other results
// exported at 0).
func TestApprovalNotificationsMetric(t *testing.T) {
	var got atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	t.Cleanup(hook.Close)
	app := newApp(t)
	mustAdd(t, app, carmy.ToolSpec{Name: "pay", Func: func(context.Context, carmy.Call) (any, error) { return "paid", nil },
		Approval: &engine.Approval{Notify: &engine.ApprovalNotify{URL: hook.URL}}})
	addr := testutil.Serve(t, app, api.Config{})
	resp, err := http.Post("http://"+addr+"/v1/tools/call", "application/json", strings.NewReader(`{"tool":"pay","request_id":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("gated call: %d, want 202", resp.StatusCode)
	}
	wait.Until(t, 30*time.Second, "the notification counted", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(raw), `carmy_approval_notifications_total{result="sent"} 1`+"\n") &&
			strings.Contains(string(raw), `carmy_approval_notifications_total{result="dropped"} 0`+"\n")
	})
	if n := got.Load(); n != 1 {
		t.Errorf("the webhook got %d requests, want 1", n)
	}
}
