package tracerecv

import (
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing/otlpread"
)

// clock is a settable clock for a Buffer.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func mustDecode(t *testing.T, raw []byte) *otlpread.Request {
	t.Helper()
	req, err := otlpread.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestStoreGroupsSpansByTrace(t *testing.T) {
	st := NewBuffer(Limits{}, nil)
	st.Add(mustDecode(t, export("a", testSpan{trace: 1, id: 1, name: "x"}, testSpan{trace: 2, id: 1, name: "y"})))
	st.Add(mustDecode(t, export("b", testSpan{trace: 1, id: 2, parent: 1, name: "z"})))
	traces := st.Traces()
	if len(traces) != 2 || len(traces[0].Spans) != 2 || len(traces[1].Spans) != 1 {
		t.Fatalf("traces %+v, want trace 1 with two spans, then trace 2 with one", traces)
	}
	if traces[0].Spans[1].Name != "z" || serviceName(traces[0].Spans[1].Resource) != "b" {
		t.Errorf("trace 1's second span %+v, want z of service b", traces[0].Spans[1])
	}
}

func TestStoreEvictsTheOldestTraces(t *testing.T) {
	st := NewBuffer(Limits{Traces: 3, Spans: 100}, nil)
	for i := byte(1); i <= 5; i++ {
		st.Add(mustDecode(t, export("a", testSpan{trace: i, id: 1, name: "x"})))
	}
	// a later span of trace 3 does not make it younger: traces age from their first span
	st.Add(mustDecode(t, export("a", testSpan{trace: 3, id: 2, name: "x"})))
	st.Add(mustDecode(t, export("a", testSpan{trace: 6, id: 1, name: "x"})))
	var got []byte
	for _, tr := range st.Traces() {
		got = append(got, tr.ID[0])
	}
	if string(got) != string([]byte{4, 5, 6}) {
		t.Errorf("kept traces %v, want the newest three [4 5 6]", got)
	}
	if s := st.Stats(); s.Traces != 3 || s.Spans != 3 || s.Evicted != 3 {
		t.Errorf("stats %+v, want 3 traces, 3 spans, 3 evicted", s)
	}
}

func TestStoreBoundsSpans(t *testing.T) {
	st := NewBuffer(Limits{Traces: 100, Spans: 4}, nil)
	st.Add(mustDecode(t, export("a", testSpan{trace: 1, id: 1}, testSpan{trace: 1, id: 2}, testSpan{trace: 2, id: 1})))
	// two spans more: trace 1 (the oldest) goes
	st.Add(mustDecode(t, export("a", testSpan{trace: 3, id: 1}, testSpan{trace: 3, id: 2})))
	if s := st.Stats(); s.Spans != 3 || s.Traces != 2 || s.Evicted != 1 {
		t.Errorf("stats %+v, want 3 spans of 2 traces, 1 evicted", s)
	}
	// one trace alone larger than the bound: its spans past it are dropped
	var big []testSpan
	for i := byte(1); i <= 6; i++ {
		big = append(big, testSpan{trace: 9, id: i})
	}
	if dropped := st.Add(mustDecode(t, export("a", big...))); dropped != 2 {
		t.Errorf("dropped %d spans, want 2", dropped)
	}
	if s := st.Stats(); s.Spans != 4 || s.Traces != 1 || s.Dropped != 2 {
		t.Errorf("stats %+v, want the 4 spans of trace 9 alone, 2 dropped", s)
	}
}

func TestStoreQuietHandsOutSettledTraces(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	st := NewBuffer(Limits{}, c.now)
	st.Add(mustDecode(t, export("a", testSpan{trace: 1, id: 1})))
	c.t = c.t.Add(500 * time.Millisecond)
	st.Add(mustDecode(t, export("a", testSpan{trace: 2, id: 1})))
	if q := st.Quiet(time.Second); len(q) != 0 {
		t.Fatalf("Quiet after 0.5 s: %d traces, want none", len(q))
	}
	c.t = c.t.Add(600 * time.Millisecond)
	if q := st.Quiet(time.Second); len(q) != 1 || q[0].ID[0] != 1 {
		t.Fatalf("Quiet after 1.1 s: %+v, want trace 1", q)
	}
	if q := st.Quiet(time.Second); len(q) != 0 {
		t.Fatalf("Quiet again: %d traces, want none (trace 1 was handed out)", len(q))
	}
	// a late span: trace 1 is handed out again, whole
	st.Add(mustDecode(t, export("a", testSpan{trace: 1, id: 2, parent: 1})))
	c.t = c.t.Add(time.Second)
	q := st.Quiet(time.Second)
	if len(q) != 2 || q[0].ID[0] != 1 || len(q[0].Spans) != 2 || q[1].ID[0] != 2 {
		t.Fatalf("Quiet after a late span: %+v, want trace 1 (2 spans) then trace 2", q)
	}
}
