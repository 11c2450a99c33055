// Package otlp turns tracing on from the standard OpenTelemetry
// environment: spans exported over OTLP/HTTP (protobuf) to the endpoint
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT names,
// configured further by the other OTEL_* variables the exporter and the
// SDK read (headers, timeout, sampler, batching, resource). With neither
// endpoint set, nothing is set up and tracing stays off (docs/tracing.md).
//
// The exporter is Carmy's own (Exporter): it encodes the OTLP protobuf
// messages with protowire, so that neither gRPC nor the generated OTLP
// packages are linked into the binary.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
// (ConfigFromEnv), a batching tracer provider (OTEL_BSP_*,
// OTEL_TRACES_SAMPLER) whose resource names the service "carmy" and the
// node (service.instance.id) unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise, and tracing.Use. Export
// failures are logged to log, at most as often as batches are sent.
//
// It returns the function that flushes the spans not yet sent and turns
// tracing off, to call once the node has stopped; when tracing stays off
// it does nothing. A protocol other than http/protobuf, or an exporter
// variable it cannot use, is an error.
func Setup(ctx context.Context, getenv func(string) string, nodeID string, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	if !Enabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	cfg, err := ConfigFromEnv(getenv, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	exp, err := NewExporter(cfg)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "carmy"), attribute.String("service.instance.id", nodeID)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", slog.Any("err", err))
	}))
	tracing.Use(tp)
	endpoint := ""
	if u, err := url.Parse(cfg.URL); err == nil {
		endpoint = u.Scheme + "://" + u.Host // no userinfo, path or query in the log
	}
	log.Info("tracing on: spans exported over OTLP/HTTP", slog.String("endpoint", endpoint))
	return func(ctx context.Context) error {
		tracing.Use(nil)
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: flushing spans: %w", err)
		}
		return nil
	}, nil
}
