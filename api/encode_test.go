package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestAppendRecordMatchesEncodingJSON checks the hand-written encoder
// against encoding/json, byte for byte, over every optional member.
func TestAppendRecordMatchesEncodingJSON(t *testing.T) {
	yes, no := true, false
	base := store.Record{
		ExecutionID: "exec_01", Key: store.Key{Principal: "p<&>", Session: "s-1", RequestID: "r-1"},
		Tool: "create_order", Status: store.StatusCompleted, Data: json.RawMessage(`{"order_id":1,"note":"a\u003cb"}`),
		StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 123e6, time.UTC), FinishedAt: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC),
		Fingerprint: "ab12", NodeID: "node1",
	}
	failed := base
	failed.Status, failed.Data, failed.Error = store.StatusFailed, nil, json.RawMessage(`{"code":"TOOL_ERROR","message":"boom"}`)
	running := base
	running.Status, running.Data, running.FinishedAt = store.StatusRunning, nil, time.Time{}
	noID := base
	noID.Key.RequestID, noID.Key.Session = "", ""
	nullData := base
	nullData.Data = nil

	views := []recordView{
		callView(engine.Response{Record: base}),
		callView(engine.Response{Record: base, Replayed: true}),
		callView(engine.Response{Record: base, Passthrough: true}),
		callView(engine.Response{Record: failed}),
		callView(engine.Response{Record: noID}),
		callView(engine.Response{Record: nullData}),
		executionView(base),
		executionView(running),
		executionView(failed),
	}
	released := executionView(running)
	released.Released = true
	views = append(views, released)
	odd := executionView(base)
	odd.Tool = "q\"\\\n\r\t\b\f\x01\x1f<>&\u2028\u2029é\xff日本"
	odd.Replayed, odd.Resolved = &no, &yes
	views = append(views, odd)

	for i, v := range views {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendRecord(nil, &v); !bytes.Equal(got, want) {
			t.Errorf("view %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// FuzzAppendString checks string escaping against encoding/json.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"\\", "\x00\x1f\x7f", "<a&b>", "\u2028\u2029", "\xff\xfe", "日本語", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
