package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// TestByKey: the reconcile probe finds an execution by the Idempotency-Key
// it was sent with (200 with the tool's result), answers 404 for a key it
// never saw, and keeps every probe with the execution it named.
func TestByKey(t *testing.T) {
	srv := httptest.NewServer(newLedger().handler())
	defer srv.Close()
	do := func(method, path, body string, h map[string]string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, raw
	}
	if code, _ := do(http.MethodGet, "/by-key/carmy_k1", "", map[string]string{"Carmy-Execution-Id": "e0"}); code != http.StatusNotFound {
		t.Fatalf("an unknown key: %d, want 404", code)
	}
	code, raw := do(http.MethodPost, "/exec", `{"value":"v1"}`, map[string]string{"Idempotency-Key": "carmy_k1", "Carmy-Execution-Id": "e1", "Carmy-Request-Id": "r1"})
	if code != http.StatusOK {
		t.Fatalf("exec: %d %s", code, raw)
	}
	code, got := do(http.MethodGet, "/by-key/carmy_k1", "", map[string]string{"Carmy-Execution-Id": "e1", "Carmy-Request-Id": "r1"})
	if code != http.StatusOK || string(got) != string(raw) {
		t.Fatalf("probe: %d %s, want 200 with the tool's answer %s", code, got, raw)
	}
	_, list := do(http.MethodGet, "/probes", "", nil)
	var probes []ledgerapi.Probe
	if err := json.Unmarshal(list, &probes); err != nil {
		t.Fatal(err)
	}
	want := []ledgerapi.Probe{
		{Entries: 0, IdempotencyKey: "carmy_k1", ExecutionID: "e0"},
		{Entries: 1, IdempotencyKey: "carmy_k1", RequestID: "r1", ExecutionID: "e1", Found: true, Seq: 1},
	}
	if len(probes) != len(want) || probes[0] != want[0] || probes[1] != want[1] {
		t.Fatalf("probes %+v, want %+v", probes, want)
	}
}

// TestLose: a call with lose has its first request cut unrecorded; the
// next request of its key is recorded, marked resent when it is the same
// execution's.
func TestLose(t *testing.T) {
	srv := httptest.NewServer(newLedger().handler())
	defer srv.Close()
	post := func(exec string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/exec", strings.NewReader(`{"value":"v","lose":true}`))
		req.Header.Set("Idempotency-Key", "carmy_k")
		req.Header.Set("Carmy-Execution-Id", exec)
		req.Close = true // no transparent retry on a reused connection
		return http.DefaultClient.Do(req)
	}
	if resp, err := post("e1"); err == nil {
		resp.Body.Close()
		t.Fatalf("the first request was answered %d, want its connection cut", resp.StatusCode)
	}
	for _, exec := range []string{"e1", "e2"} {
		resp, err := post(exec)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a later request of %s: %v", exec, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/entries")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var entries []ledgerapi.Entry
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || !entries[0].Resent || entries[0].ExecutionID != "e1" || entries[1].Resent {
		t.Fatalf("entries %+v, want e1 resent, then e2 not", entries)
	}
}
