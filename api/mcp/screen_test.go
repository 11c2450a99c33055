package mcp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// rpcAnswer is a JSON-RPC answer as a client reads it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

// TestDuplicateKeysRefused checks that a message repeating a member, at
// any depth, is refused as malformed (400, JSON-RPC -32600 with the
// INVALID_REQUEST envelope) on both paths, and that no tool runs: the
// SDK used to keep the last value, so {"name":"echo","name":"fail"} ran
// fail.
func TestDuplicateKeysRefused(t *testing.T) {
	cases := map[string]string{
		"name in params":      callBody("1", `{"name":"echo","name":"fail"}`),
		"escaped name":        callBody("1", `{"name":"echo","n\u0061me":"fail"}`),
		"method":              `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"fail"}}`,
		"id":                  `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"fail"}}`,
		"params":              `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"fail"}}`,
		"in arguments":        callBody("1", `{"name":"fail","arguments":{"a":1,"a":2}}`),
		"deep in arguments":   callBody("1", `{"name":"fail","arguments":{"x":[{"b":{"c":1,"c":2}}]}}`),
		"in _meta":            callBody("1", `{"name":"fail","_meta":{"carmy/request_id":"r-1","carmy/request_id":"r-2"}}`),
		"in carmy/metadata":   callBody("1", `{"name":"fail","_meta":{"carmy/metadata":{"k":1,"k":1}}}`),
		"in a tools/list":     `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"a","cursor":"b"}}`,
		"lone surrogate":      callBody("1", `{"name":"fail","arguments":{"a":"\ud800"}}`),
		"number out of range": callBody("1", `{"name":"fail","arguments":{"a":1e400}}`),
	}
	for _, withAuth := range []bool{false, true} {
		p := newPathPair(t, withAuth)
		for name, body := range cases {
			for _, h := range []*Handler{p.fast, p.sdk} {
				got := p.serve(h, fastCase{body: body})
				var a rpcAnswer
				if err := json.Unmarshal([]byte(got.body), &a); err != nil || got.status != http.StatusBadRequest || a.Error == nil ||
					a.Error.Code != jsonrpc.CodeInvalidRequest || a.Error.Data["code"] != store.CodeInvalidRequest {
					t.Errorf("auth=%v %s: %d %s, want 400 with -32600 and INVALID_REQUEST", withAuth, name, got.status, got.body)
				}
			}
			if obs := append(p.fastObs.take(), p.sdkObs.take()...); len(obs) != 0 {
				t.Errorf("auth=%v %s: calls observed: %+v", withAuth, name, obs)
			}
		}
	}
}

// countingPair is an endpoint without auth whose Admit counts the
// messages it is asked about and refuses every one past limit.
func countingPair(t *testing.T, limit int64, bodyLimit ...int64) (*Handler, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	cfg := Config{
		Runtime:   detRuntime{},
		BodyLimit: 1 << 20,
		Logger:    slog.New(slog.DiscardHandler),
		Anonymous: &engine.Caller{Principal: "anonymous"},
		Admit: func(*engine.Caller) error {
			if n.Add(1) > limit {
				return store.NewError(store.CodeRateLimited, "over the rate")
			}
			return nil
		},
	}
	if len(bodyLimit) > 0 {
		cfg.BodyLimit = bodyLimit[0]
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, &n
}

// TestEveryMessageCountsAgainstTheRate checks that Admit is asked for
// every method, not only tools/call, and that a message over the rate is
// answered 429 with JSON-RPC error CodeRateLimited and the RATE_LIMITED
// envelope, while a tools/call over it is the isError result of docs/mcp.md.
func TestEveryMessageCountsAgainstTheRate(t *testing.T) {
	h, n := countingPair(t, 2)
	p := &pathPair{}
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	} {
		if got := p.serve(h, fastCase{body: body}); got.status != http.StatusOK {
			t.Fatalf("message %d within the rate: %d %s", i, got.status, got.body)
		}
	}
	if n.Load() != 2 {
		t.Fatalf("Admit asked %d times for a tools/list and a ping, want 2", n.Load())
	}
	got := p.serve(h, fastCase{body: `{"jsonrpc":"2.0","id":"x","method":"tools/list"}`})
	var a rpcAnswer
	if err := json.Unmarshal([]byte(got.body), &a); err != nil || got.status != http.StatusTooManyRequests || a.Error == nil ||
		a.Error.Code != CodeRateLimited || a.Error.Data["code"] != store.CodeRateLimited || string(a.ID) != `"x"` {
		t.Errorf("tools/list over the rate: %d %s", got.status, got.body)
	}
	got = p.serve(h, fastCase{body: callBody("3", `{"name":"echo"}`)})
	a = rpcAnswer{}
	if err := json.Unmarshal([]byte(got.body), &a); err != nil || got.status != http.StatusOK || a.Result == nil || !a.Result.IsError ||
		a.Result.Meta[MetaErrorCode] != store.CodeRateLimited {
		t.Errorf("tools/call over the rate: %d %s", got.status, got.body)
	}
}

// batchOf is a batch of n copies of msg (with ids 1…n).
func batchOf(n int, msg string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(msg, i+1)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestBatches checks JSON-RPC batches: refused at the versions that
// removed them; at older ones (and with no version) served with at most
// MaxBatchEntries entries, each counted against the rate, and an answer
// bounded by MaxBatchAnswerBytes.
func TestBatches(t *testing.T) {
	list := `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`
	without := mcpversion.Versions(func(f mcpversion.Features) bool { return !f.Batches })
	if len(without) == 0 {
		t.Fatal("no version without batches")
	}
	for _, v := range append(without, "2099-01-01") {
		h, n := countingPair(t, 1000)
		got := (&pathPair{}).serve(h, fastCase{body: batchOf(2, list), header: map[string]string{"Mcp-Protocol-Version": v}})
		var a rpcAnswer
		if err := json.Unmarshal([]byte(got.body), &a); err != nil || got.status != http.StatusBadRequest || a.Error == nil || a.Error.Code != jsonrpc.CodeInvalidRequest {
			t.Errorf("batch at %s: %d %s, want 400 -32600", v, got.status, got.body)
		}
		if n.Load() != 0 {
			t.Errorf("batch at %s: %d entries admitted", v, n.Load())
		}
	}
	for _, v := range append([]string{""}, mcpversion.Versions(func(f mcpversion.Features) bool { return f.Batches })...) {
		t.Run("version="+v, func(t *testing.T) {
			h, n := countingPair(t, 1000)
			hdr := map[string]string{"Mcp-Protocol-Version": v}
			got := (&pathPair{}).serve(h, fastCase{body: batchOf(3, list), header: hdr})
			var as []rpcAnswer
			if err := json.Unmarshal([]byte(got.body), &as); err != nil || got.status != http.StatusOK || len(as) != 3 {
				t.Fatalf("batch of 3: %d %s", got.status, got.body)
			}
			if n.Load() != 3 {
				t.Errorf("batch of 3: %d entries admitted, want 3", n.Load())
			}
			got = (&pathPair{}).serve(h, fastCase{body: batchOf(MaxBatchEntries+1, list), header: hdr})
			if got.status != http.StatusBadRequest || n.Load() != 3 {
				t.Errorf("batch of %d: %d %s, %d admitted", MaxBatchEntries+1, got.status, got.body, n.Load()-3)
			}
			// Each entry over the rate is refused on its own.
			h, _ = countingPair(t, 1)
			got = (&pathPair{}).serve(h, fastCase{body: batchOf(2, list), header: hdr})
			as = nil
			if err := json.Unmarshal([]byte(got.body), &as); err != nil || len(as) != 2 || as[0].Error != nil || as[1].Error == nil || as[1].Error.Code != CodeRateLimited {
				t.Errorf("batch of 2 with room for 1: %d %s", got.status, got.body)
			}
		})
	}
}

// TestBatchAnswerBounded checks that a batch whose answers would pass
// MaxBatchAnswerBytes stops: the entry that does not fit and every later
// one are errors CodeBatchFull, the later ones not run, and the answer
// stays within the bound (plus those small errors).
func TestBatchAnswerBounded(t *testing.T) {
	// echo answers with its arguments, twice (content and structured).
	arg := strings.Repeat("x", 900<<10) // answered in about 1.8 MB
	msg := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"a":"` + arg + `"}}}`
	body := "[" + fmt.Sprintf(msg, 1) + "," + fmt.Sprintf(msg, 2) + "," + fmt.Sprintf(msg, 3) + "," + fmt.Sprintf(msg, 4) + "]"
	h2, n := countingPair(t, 1000, int64(len(body)))
	got := (&pathPair{}).serve(h2, fastCase{body: body, header: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}})
	var as []rpcAnswer
	if err := json.Unmarshal([]byte(got.body), &as); err != nil || len(as) != 4 {
		t.Fatalf("batch: %d %.300s", got.status, got.body)
	}
	if len(got.body) > MaxBatchAnswerBytes+4096 {
		t.Errorf("answer of %d bytes, over %d", len(got.body), MaxBatchAnswerBytes)
	}
	if as[0].Error != nil || as[1].Error != nil || as[2].Error == nil || as[2].Error.Code != CodeBatchFull || as[3].Error == nil || as[3].Error.Code != CodeBatchFull {
		t.Errorf("batch answers: %s", summary(as))
	}
	if n.Load() != 3 {
		t.Errorf("%d calls ran, want 3 (the fourth is not run)", n.Load())
	}
	if string(as[3].ID) != "4" {
		t.Errorf("the entry not run is answered with id %s, want 4", as[3].ID)
	}
}

// summary names each answer: ok or its error code.
func summary(as []rpcAnswer) string {
	var out []string
	for _, a := range as {
		if a.Error != nil {
			out = append(out, fmt.Sprintf("%s:error %d %s", a.ID, a.Error.Code, a.Error.Message))
		} else {
			out = append(out, string(a.ID)+":ok")
		}
	}
	return strings.Join(out, "; ")
}
