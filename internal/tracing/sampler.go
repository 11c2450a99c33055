package tracing

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/trace"
)

// The samplers of OTEL_TRACES_SAMPLER.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Sampler decides whether a new span is sampled (recorded and exported),
// as the OpenTelemetry samplers of the same names do. Its zero value is
// parentbased_always_on.
type Sampler struct {
	// name is the sampler's OTEL_TRACES_SAMPLER name; "" is
	// parentbased_always_on.
	name string
	// ratio is the traceidratio's ratio, and bound the trace ids it
	// samples: those whose last 8 bytes, shifted right once, are below.
	ratio float64
	bound uint64
}

// NewSampler returns the sampler named name (an OTEL_TRACES_SAMPLER
// value; "" is parentbased_always_on) with ratio, the ratio of the
// traceidratio ones (from 0 to 1; ignored by the others).
func NewSampler(name string, ratio float64) (Sampler, error) {
	switch name {
	case "":
		name = SamplerParentBasedAlwaysOn
	case SamplerAlwaysOn, SamplerAlwaysOff, SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff:
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		if !(ratio >= 0 && ratio <= 1) {
			return Sampler{}, fmt.Errorf("the ratio %v is not from 0 to 1", ratio)
		}
	default:
		return Sampler{}, fmt.Errorf("no sampler %q", name)
	}
	s := Sampler{name: name, ratio: ratio}
	switch {
	case ratio >= 1:
		s.bound = math.MaxUint64
	case ratio > 0:
		s.bound = uint64(ratio * (1 << 63))
	}
	return s, nil
}

// String is the sampler's name, with its ratio when it has one.
func (s Sampler) String() string {
	switch s.name {
	case "":
		return SamplerParentBasedAlwaysOn
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		return fmt.Sprintf("%s(%g)", s.name, s.ratio)
	}
	return s.name
}

// Sample reports whether a new span of trace id, child of parent (the
// zero context for a root), is sampled. A parentbased sampler follows a
// valid parent's sampled flag and asks its root sampler otherwise.
func (s Sampler) Sample(parent trace.SpanContext, id trace.TraceID) bool {
	switch s.name {
	case "", SamplerParentBasedAlwaysOn:
		return !parent.IsValid() || parent.IsSampled()
	case SamplerParentBasedAlwaysOff:
		return parent.IsValid() && parent.IsSampled()
	case SamplerParentBasedTraceIDRatio:
		if parent.IsValid() {
			return parent.IsSampled()
		}
		return s.ratioSamples(id)
	case SamplerAlwaysOn:
		return true
	case SamplerTraceIDRatio:
		return s.ratioSamples(id)
	default: // always_off
		return false
	}
}

// ratioSamples reports whether the trace id is among the ratio sampled:
// the test of OpenTelemetry's TraceIDRatioBased, so that nodes (and
// other services) sampling the same trace agree.
func (s Sampler) ratioSamples(id trace.TraceID) bool {
	if s.bound == math.MaxUint64 {
		return true
	}
	return binary.BigEndian.Uint64(id[8:16])>>1 < s.bound
}
