package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8",
		Main:     debug.Module{Path: Module, Version: "v0.0.0-20260101000000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}
	installed := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v1.2.3"}}
	embedded := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
		Deps: []*debug.Module{{Path: "example.com/other", Version: "v9.9.9"}, {Path: Module, Version: "v1.4.0"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "(devel)"}}
	for _, tt := range []struct {
		name     string
		bi       *debug.BuildInfo
		ldV, ldC string
		want     Info
	}{
		{"go build in a checkout", checkout, "", "", Info{"v0.0.0-20260101000000-0123456789ab+dirty", "0123456789abcdef-dirty", "go1.26.8"}},
		{"go install @v1.2.3", installed, "", "", Info{"v1.2.3", "", "go1.26.8"}},
		{"a program embedding carmy", embedded, "", "", Info{"v1.4.0", "", "go1.26.8"}},
		{"no version recorded", devel, "", "", Info{"dev", "", "go1.26.8"}},
		{"ldflags win", checkout, "v2.0.0", "fedcba", Info{"v2.0.0", "fedcba", "go1.26.8"}},
	} {
		if got := of(tt.bi, tt.ldV, tt.ldC); got != tt.want {
			t.Errorf("%s: of = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := of(nil, "", ""); got.Version != "dev" || got.GoVersion == "" {
		t.Errorf("no build info: %+v, want version dev and the runtime's Go version", got)
	}
}
