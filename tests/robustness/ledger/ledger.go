package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// maxDelay bounds the delay a call may ask for.
const maxDelay = 30 * time.Second

// ledger is the in-memory list of executions.
type ledger struct {
	mu      sync.Mutex
	entries []ledgerapi.Entry
	probes  []ledgerapi.Probe
	lost    map[string]string // Idempotency-Key → the execution whose request was cut (Args.Lose)
}

func newLedger() *ledger { return &ledger{lost: map[string]string{}} }

func (l *ledger) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", l.exec)
	mux.HandleFunc("GET /entries", l.list)
	mux.HandleFunc("GET /by-key/{key}", l.byKey)
	mux.HandleFunc("GET /probes", l.listProbes)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// exec records the execution first, so that a tool that then times out or
// loses its caller is still on the ledger, then waits the requested delay
// (bounded by the caller going away) and answers the entry. With
// Args.Lose, the first request of its Idempotency-Key is not recorded and
// its connection is cut instead.
func (l *ledger) exec(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	var args ledgerapi.Args
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "arguments: " + err.Error()})
			return
		}
	}
	l.mu.Lock()
	ikey, exec := r.Header.Get("Idempotency-Key"), r.Header.Get("Carmy-Execution-Id")
	if _, cut := l.lost[ikey]; args.Lose && !cut {
		l.lost[ikey] = exec
		l.mu.Unlock()
		cutConnection(w)
		return
	}
	e := ledgerapi.Entry{
		Seq:            uint64(len(l.entries) + 1),
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		RequestID:      r.Header.Get("Carmy-Request-Id"),
		ExecutionID:    r.Header.Get("Carmy-Execution-Id"),
		FencingToken:   r.Header.Get("Carmy-Fencing-Token"),
		Value:          args.Value,
		Resent:         exec != "" && l.lost[ikey] == exec,
	}
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	if d := time.Duration(args.DelayMS) * time.Millisecond; d > 0 {
		t := time.NewTimer(min(d, maxDelay))
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	writeJSON(w, http.StatusOK, ledgerapi.Result{Seq: e.Seq, ExecutionID: e.ExecutionID, Value: e.Value})
}

func (l *ledger) list(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := append([]ledgerapi.Entry{}, l.entries...)
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// cutConnection closes the request's connection without an answer, as an
// upstream that crashed after reading it would.
func cutConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// byKey answers a reconcile probe: 200 with the Result of the first entry
// whose Idempotency-Key is key (what the tool answered, or would have, for
// that execution), 404 when the ledger holds none. Every answer is kept,
// with the execution the probe named (its Carmy-* headers), for the
// harness to check Carmy's resolutions against.
func (l *ledger) byKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	l.mu.Lock()
	p := ledgerapi.Probe{
		Entries:        uint64(len(l.entries)),
		IdempotencyKey: key,
		RequestID:      r.Header.Get("Carmy-Request-Id"),
		ExecutionID:    r.Header.Get("Carmy-Execution-Id"),
		FencingToken:   r.Header.Get("Carmy-Fencing-Token"),
	}
	var found ledgerapi.Entry
	for _, e := range l.entries {
		if e.IdempotencyKey == key && key != "" {
			found, p.Found, p.Seq = e, true, e.Seq
			break
		}
	}
	l.probes = append(l.probes, p)
	l.mu.Unlock()
	if !p.Found {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no execution with this idempotency key"})
		return
	}
	writeJSON(w, http.StatusOK, ledgerapi.Result{Seq: found.Seq, ExecutionID: found.ExecutionID, Value: found.Value})
}

func (l *ledger) listProbes(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := append([]ledgerapi.Probe{}, l.probes...)
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
