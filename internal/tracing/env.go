package tracing

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The environment variables of sampling and batching (OpenTelemetry's).
const (
	EnvSampler            = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg         = "OTEL_TRACES_SAMPLER_ARG"
	EnvScheduleDelay      = "OTEL_BSP_SCHEDULE_DELAY"
	EnvExportTimeout      = "OTEL_BSP_EXPORT_TIMEOUT"
	EnvMaxQueueSize       = "OTEL_BSP_MAX_QUEUE_SIZE"
	EnvMaxExportBatchSize = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
)

// maxQueueSize bounds OTEL_BSP_MAX_QUEUE_SIZE: the queue is allocated
// whole.
const maxQueueSize = 1 << 22

// OptionsFromEnv reads the Provider's Options from the variables getenv
// gives: OTEL_TRACES_SAMPLER (always_on, always_off, traceidratio,
// parentbased_always_on, parentbased_always_off, parentbased_traceidratio;
// by default parentbased_always_on) and OTEL_TRACES_SAMPLER_ARG (the
// ratio of the traceidratio ones, from 0 to 1; by default 1),
// OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_EXPORT_TIMEOUT (milliseconds, from
// 1 to 3600000), OTEL_BSP_MAX_QUEUE_SIZE and
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE (at least 1; the batch no larger than
// the queue). A value it cannot use is an error that names its variable,
// not a default. Options.Log is left nil.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	name := strings.TrimSpace(getenv(EnvSampler))
	ratio := 1.0
	if arg := strings.TrimSpace(getenv(EnvSamplerArg)); arg != "" &&
		(name == SamplerTraceIDRatio || name == SamplerParentBasedTraceIDRatio) {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return o, fmt.Errorf("%s=%q: want a ratio from 0 to 1 for %s", EnvSamplerArg, arg, name)
		}
		ratio = r
	}
	var err error
	if o.Sampler, err = NewSampler(name, ratio); err != nil {
		return o, fmt.Errorf("%s=%q: want one of %s, %s, %s, %s, %s, %s", EnvSampler, name,
			SamplerAlwaysOn, SamplerAlwaysOff, SamplerTraceIDRatio,
			SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio)
	}
	if o.ScheduleDelay, err = envMillis(getenv, EnvScheduleDelay); err != nil {
		return o, err
	}
	if o.ExportTimeout, err = envMillis(getenv, EnvExportTimeout); err != nil {
		return o, err
	}
	if o.MaxQueueSize, err = envCount(getenv, EnvMaxQueueSize, maxQueueSize); err != nil {
		return o, err
	}
	if o.MaxExportBatchSize, err = envCount(getenv, EnvMaxExportBatchSize, maxQueueSize); err != nil {
		return o, err
	}
	queue := o.MaxQueueSize
	if queue == 0 {
		queue = DefaultMaxQueueSize
	}
	if o.MaxExportBatchSize > queue {
		return o, fmt.Errorf("%s=%d: larger than the queue (%s=%d)", EnvMaxExportBatchSize, o.MaxExportBatchSize, EnvMaxQueueSize, queue)
	}
	return o, nil
}

// envMillis reads variable name as milliseconds, from 1 to an hour; 0
// when it is not set.
func envMillis(getenv func(string) string, name string) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 1 || ms > int64(time.Hour/time.Millisecond) {
		return 0, fmt.Errorf("%s=%q: want a number of milliseconds, from 1 to 3600000", name, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// envCount reads variable name as a count from 1 to most; 0 when it is
// not set.
func envCount(getenv func(string) string, name string, most int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s=%q: want a number from 1 to %d", name, v, most)
	}
	return n, nil
}
