// Package otlp turns tracing on from the standard OpenTelemetry
// environment: spans exported over OTLP/HTTP (protobuf) to the endpoint
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT names,
// configured further by the other OTEL_* variables (headers, timeout,
// sampler, batching, resource), with Carmy's own tracer
// (tracing.Provider): the binary links no OpenTelemetry SDK. With neither
// endpoint set, nothing is set up and tracing stays off (docs/tracing.md).
//
// The exporter is Carmy's own (Exporter): it encodes the OTLP protobuf
// messages with protowire, so that neither gRPC nor the generated OTLP
// packages are linked into the binary.
package otlp

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/carmyhq/carmy/internal/tracing"
)

// The environment variables that decide whether tracing is on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Enabled reports whether getenv turns tracing on: an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT),
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns
// it off.
func Enabled(getenv func(string) string) bool {
	if getenv(EnvEndpoint) == "" && getenv(EnvTracesEndpoint) == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false
	}
	return !strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none")
}

// Setup turns tracing on when getenv says so (Enabled): an OTLP/HTTP
// exporter configured by the OTEL_EXPORTER_OTLP_* variables getenv gives
// (ConfigFromEnv), Carmy's tracing.Provider sampling and batching as the
// OTEL_TRACES_SAMPLER* and OTEL_BSP_* variables say
// (tracing.OptionsFromEnv), a resource that names the service "carmy"
// and the node (service.instance.id) unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise, and tracing.Use. Export
// failures are logged to log, at most as often as batches are sent, and
// spans dropped by a full queue at most every ten seconds.
//
// It returns the function that turns tracing off and flushes the spans
// not yet sent, to call once the node has stopped; when tracing stays
// off it does nothing. A protocol other than http/protobuf, or a
// variable it cannot use, is an error that names the variable.
func Setup(_ context.Context, getenv func(string) string, nodeID string, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	if !Enabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	cfg, err := ConfigFromEnv(getenv, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	opts, err := tracing.OptionsFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	attrs, err := resourceFromEnv(getenv, nodeID)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	cfg.Resource = Resource{Attributes: attrs, ScopeName: tracing.ScopeName}
	exp, err := NewExporter(cfg)
	if err != nil {
		return nil, err
	}
	opts.Log = log
	p := tracing.NewProvider(exp, opts)
	tracing.Use(p)
	endpoint := ""
	if u, err := url.Parse(cfg.URL); err == nil {
		endpoint = u.Scheme + "://" + u.Host // no userinfo, path or query in the log
	}
	log.Info("tracing on: spans exported over OTLP/HTTP", slog.String("endpoint", endpoint),
		slog.String("sampler", opts.Sampler.String()))
	return func(ctx context.Context) error {
		tracing.Use(nil)
		err := p.Shutdown(ctx)
		exp.Shutdown(context.Background())
		if err != nil {
			return fmt.Errorf("tracing: flushing spans: %w", err)
		}
		return nil
	}, nil
}
