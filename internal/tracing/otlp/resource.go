package otlp

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/carmyhq/carmy/internal/buildinfo"
)

// The environment variables of the resource.
const (
	EnvServiceName        = "OTEL_SERVICE_NAME"
	EnvResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
)

// resourceFromEnv is the resource of the node's spans, sorted by key:
// service.name carmy and service.instance.id nodeID, overridden by
// OTEL_RESOURCE_ATTRIBUTES (key=value pairs separated by commas, values
// percent-encoded), service.name by OTEL_SERVICE_NAME over both; and
// telemetry.sdk.name carmy, telemetry.sdk.language go and
// telemetry.sdk.version Carmy's version. An OTEL_RESOURCE_ATTRIBUTES
// entry that is not key=value is an error.
func resourceFromEnv(getenv func(string) string, nodeID string) ([]attribute.KeyValue, error) {
	attrs := map[string]string{"service.name": "carmy", "service.instance.id": nodeID}
	if raw := strings.TrimSpace(getenv(EnvResourceAttributes)); raw != "" {
		for i, pair := range strings.Split(raw, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" { // the entry is not quoted: it may hold a secret
				return nil, fmt.Errorf("%s: entry %d is not key=value", EnvResourceAttributes, i+1)
			}
			value, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%s: the value of %s is not percent-encoded", EnvResourceAttributes, k)
			}
			attrs[k] = value
		}
	}
	if name := strings.TrimSpace(getenv(EnvServiceName)); name != "" {
		attrs["service.name"] = name
	}
	attrs["telemetry.sdk.name"] = "carmy"
	attrs["telemetry.sdk.language"] = "go"
	attrs["telemetry.sdk.version"] = buildinfo.Version()
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	slices.SortFunc(kvs, func(a, b attribute.KeyValue) int { return cmp.Compare(a.Key, b.Key) })
	return kvs, nil
}
