// Package buildinfo says which build of Carmy is running: its version,
// the commit it was built from, and the Go toolchain, for `carmy version`,
// the cluster view, the fleet's heartbeats and the carmy_build_info metric.
//
// The version and commit come from the binary's build information
// (runtime/debug.ReadBuildInfo): `go install …@v1.2.3` stamps the module
// version, and `go build` in a git checkout stamps a pseudo-version and the
// vcs.revision and vcs.modified settings. A program that embeds Carmy as a
// library reports the Carmy module it links. A build without that
// information (a Docker build of a copied tree, say) can set both with
//
//	-ldflags "-X github.com/carmyhq/carmy/internal/buildinfo.version=v1.2.3
//	          -X github.com/carmyhq/carmy/internal/buildinfo.commit=<sha>"
//
// which win over what the build information says.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Module is Carmy's module path.
const Module = "github.com/carmyhq/carmy"

// Set by the linker (-ldflags -X); empty when not.
var version, commit string

// Info is one build of Carmy.
type Info struct {
	// Version is the module version (v1.2.3, or a pseudo-version of a
	// checkout, with "+dirty" when its tree was modified); "dev" when the
	// build recorded none.
	Version string
	// Commit is the git commit the binary was built from, with "-dirty"
	// when the tree had uncommitted changes; "" when unknown.
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's build of Carmy, read once.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = of(bi, version, commit)
	})
	return info
}

// Version is Get().Version.
func Version() string { return Get().Version }

// of derives the Info of a build from its build information (nil when
// the binary has none) and the linker's values (which win when set).
func of(bi *debug.BuildInfo, ldVersion, ldCommit string) Info {
	in := Info{Version: ldVersion, Commit: ldCommit, GoVersion: runtime.Version()}
	if bi != nil {
		in.GoVersion = bi.GoVersion
		if in.Version == "" {
			in.Version = moduleVersion(bi)
		}
		if in.Commit == "" {
			in.Commit = vcsCommit(bi)
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// moduleVersion is the version of Carmy's module in bi: the main module's
// when the binary is Carmy's, else the dependency's; "" for "(devel)".
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != Module {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == Module {
				m = d
				break
			}
		}
	}
	if m == nil {
		return ""
	}
	if m.Replace != nil && m.Replace.Version != "" {
		m = m.Replace
	}
	if m.Version == "(devel)" {
		return ""
	}
	return m.Version
}

// vcsCommit is the vcs.revision setting of bi, with "-dirty" when
// vcs.modified is true.
func vcsCommit(bi *debug.BuildInfo) string {
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}
