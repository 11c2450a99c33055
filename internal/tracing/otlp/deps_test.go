package otlp_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoGRPC: the carmy binary, which links this package, links
// no gRPC, no generated OTLP protobuf package, no OpenTelemetry exporter
// and no OpenTelemetry SDK: the exporter is this package's and the tracer
// package tracing's (the generated types are for its tests only).
func TestBinaryLinksNoGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list packages with: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", "../../../cmd/carmy").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/carmy: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "github.com/carmyhq/carmy/internal/tracing/otlp") {
		t.Fatalf("go list -deps ./cmd/carmy listed %d packages, not this one among them", len(deps))
	}
	for _, dep := range deps {
		for _, banned := range []string{"google.golang.org/grpc", "go.opentelemetry.io/proto/otlp",
			"google.golang.org/genproto", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/otel/sdk"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("carmy links %s", dep)
			}
		}
	}
}
