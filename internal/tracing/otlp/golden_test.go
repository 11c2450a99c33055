package otlp_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// golden is the file that holds the encoding of a span with an attribute
// of each type, in hex, 32 bytes a line.
var golden = filepath.Join("testdata", "span_every_attribute.hex")

// TestGoldenSpanOfEveryAttributeType: the bytes of a request of one span
// with an attribute of each type (fullSpan) are those of the golden
// file, and those the generated OTLP types make of the same request (the
// same fields in the same order: field number order).
func TestGoldenSpanOfEveryAttributeType(t *testing.T) {
	res := otlp.Resource{Attributes: []attribute.KeyValue{attribute.String("service.name", "carmy")}, ScopeName: "github.com/carmyhq/carmy"}
	span, want := fullSpan()
	got := otlp.AppendRequest(nil, res, []*tracing.Record{span})

	var lines []string
	for rest := hex.EncodeToString(got); rest != ""; {
		n := min(64, len(rest))
		lines = append(lines, rest[:n])
		rest = rest[n:]
	}
	text := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestGoldenSpanOfEveryAttributeType -update ./internal/tracing/otlp writes it)", err)
	}
	if string(raw) != text {
		t.Errorf("the encoding changed: got\n%swant (%s)\n%s", text, golden, raw)
	}

	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "carmy"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "github.com/carmyhq/carmy"},
			Spans: []*tracepb.Span{want}}},
	}}}
	generated, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, generated) {
		t.Errorf("the encoding differs from the generated types':\n%x\n%x", got, generated)
	}
}
