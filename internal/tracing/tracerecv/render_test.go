package tracerecv

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// carmyTrace is a call's trace as a node exports it: the call under the
// caller's span (not exported), its three children.
func carmyTrace(t *testing.T) Trace {
	t.Helper()
	st := NewBuffer(Limits{}, nil)
	const ms = 1_000_000
	base := uint64(1_700_000_000_000_000_000)
	st.Add(mustDecode(t, export("carmy",
		testSpan{trace: 7, id: 3, parent: 1, name: "carmy.tool", start: base + 1*ms, end: base + 2*ms, attrs: map[string]string{"carmy.status": "succeeded"}},
		testSpan{trace: 7, id: 2, parent: 1, name: "carmy.reserve", start: base, end: base + ms/2, attrs: map[string]string{"carmy.outcome": "reserved"}},
		testSpan{trace: 7, id: 4, parent: 1, name: "carmy.complete", start: base + 2*ms, end: base + 3*ms, status: 2, message: "store down"},
	)))
	st.Add(mustDecode(t, export("carmy",
		testSpan{trace: 7, id: 1, parent: 9, name: "carmy.call", start: base, end: base + 3*ms + 1500, attrs: map[string]string{"carmy.tool": "echo", "http.route": "/v1/tools/call"}},
	)))
	return st.Traces()[0]
}

func TestWriteTree(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTree(&b, carmyTrace(t), "carmy."); err != nil {
		t.Fatal(err)
	}
	want := `trace 07000000000000000000000000000001  carmy, 4 spans, 3.002ms
  carmy.call  3.002ms  server  carmy.tool=echo  parent 0000000000000009
  ├─ carmy.reserve  500µs  server  carmy.outcome=reserved
  ├─ carmy.tool  1ms  server  carmy.status=succeeded
  └─ carmy.complete  1ms  server  status=error "store down"
`
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteJaeger(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJaeger(&b, []Trace{carmyTrace(t)}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				TraceID, SpanID, OperationName, ProcessID string
				References                                []struct{ RefType, TraceID, SpanID string }
				StartTime, Duration                       uint64
				Tags                                      []struct {
					Key, Type string
					Value     any
				}
			}
			Processes map[string]struct{ ServiceName string }
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	if len(doc.Data) != 1 || doc.Data[0].TraceID != "07000000000000000000000000000001" || len(doc.Data[0].Spans) != 4 {
		t.Fatalf("data %+v, want one trace of 4 spans", doc.Data)
	}
	tr := doc.Data[0]
	byName := map[string]int{}
	for i, s := range tr.Spans {
		byName[s.OperationName] = i
		if s.TraceID != tr.TraceID || tr.Processes[s.ProcessID].ServiceName != "carmy" {
			t.Errorf("span %s: trace %s, process %q (%+v)", s.OperationName, s.TraceID, s.ProcessID, tr.Processes)
		}
	}
	call := tr.Spans[byName["carmy.call"]]
	if call.SpanID != "0000000000000001" || call.StartTime != 1_700_000_000_000_000 || call.Duration != 3001 {
		t.Errorf("carmy.call %+v, want span 0000000000000001 starting at 1700000000000000 µs, lasting 3001 µs", call)
	}
	if len(call.References) != 1 || call.References[0] != (struct{ RefType, TraceID, SpanID string }{"CHILD_OF", tr.TraceID, "0000000000000009"}) {
		t.Errorf("carmy.call references %+v, want CHILD_OF the caller's span", call.References)
	}
	tags := map[string]any{}
	for _, tag := range tr.Spans[byName["carmy.complete"]].Tags {
		tags[tag.Key+":"+tag.Type] = tag.Value
	}
	for k, v := range map[string]any{"otel.status_code:string": "ERROR", "otel.status_description:string": "store down", "error:bool": true, "span.kind:string": "server"} {
		if tags[k] != v {
			t.Errorf("carmy.complete tag %s = %v, want %v (tags %v)", k, tags[k], v, tags)
		}
	}
	if !strings.Contains(b.String(), `"key": "carmy.tool"`) {
		t.Errorf("no carmy.tool tag in\n%s", b.String())
	}
}
