package tracing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
)

// TestOptionsFromEnv: the sampler and batching variables are read as
// OpenTelemetry's, unset ones left to their defaults.
func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "4000",
		"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
	}
	o, err := tracing.OptionsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.Sampler.String() != "parentbased_traceidratio(0.25)" || o.ScheduleDelay != 250*time.Millisecond ||
		o.ExportTimeout != 4*time.Second || o.MaxQueueSize != 100 || o.MaxExportBatchSize != 10 {
		t.Errorf("OptionsFromEnv(%v) = %+v", env, o)
	}

	o, err = tracing.OptionsFromEnv(func(string) string { return "" })
	if err != nil || o.Sampler.String() != "parentbased_always_on" || o.ScheduleDelay != 0 || o.MaxQueueSize != 0 {
		t.Errorf("OptionsFromEnv of nothing = %+v, %v; want the defaults", o, err)
	}
	// The argument of a sampler without a ratio is not read.
	o, err = tracing.OptionsFromEnv(func(k string) string {
		return map[string]string{"OTEL_TRACES_SAMPLER": "always_off", "OTEL_TRACES_SAMPLER_ARG": "x"}[k]
	})
	if err != nil || o.Sampler.String() != "always_off" {
		t.Errorf("always_off with an argument: %+v, %v", o, err)
	}
	o, err = tracing.OptionsFromEnv(func(k string) string { return map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio"}[k] })
	if err != nil || o.Sampler.String() != "traceidratio(1)" {
		t.Errorf("traceidratio without an argument: %+v, %v; want a ratio of 1", o, err)
	}
}

// TestOptionsFromEnvRefuses: a value that cannot be used is an error
// that names its variable.
func TestOptionsFromEnvRefuses(t *testing.T) {
	for _, c := range []struct{ name, value, also string }{
		{"OTEL_TRACES_SAMPLER", "sometimes", ""},
		{"OTEL_TRACES_SAMPLER", "AlwaysOn", ""},
		{"OTEL_TRACES_SAMPLER_ARG", "half", "traceidratio"},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5", "parentbased_traceidratio"},
		{"OTEL_TRACES_SAMPLER_ARG", "-0.1", "traceidratio"},
		{"OTEL_BSP_SCHEDULE_DELAY", "5s", ""},
		{"OTEL_BSP_SCHEDULE_DELAY", "0", ""},
		{"OTEL_BSP_EXPORT_TIMEOUT", "-1", ""},
		{"OTEL_BSP_EXPORT_TIMEOUT", "3600001", ""},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0", ""},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "lots", ""},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", ""},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "9000", ""}, // more than the default queue
	} {
		env := map[string]string{c.name: c.value}
		if c.also != "" {
			env["OTEL_TRACES_SAMPLER"] = c.also
		}
		_, err := tracing.OptionsFromEnv(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), c.name+"=") {
			t.Errorf("%s=%s: err %v, want one that names %s", c.name, c.value, err, c.name)
		}
	}
}
