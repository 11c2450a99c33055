package engine_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/carmyhq/carmy"

// goList runs go list with args in this package's directory and returns
// its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list packages with: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.Fields(string(out))
}

// TestLayout pins the direction of the dependencies (DESIGN.md, Layout):
// cmd → carmy → api → engine → store. The runtime and the store, and a
// program that uses only the runtime with the in-memory store, link no
// HTTP framework, no metrics library, no consensus or gossip, and no
// package above them.
func TestLayout(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/labstack/echo",
		"github.com/prometheus",
		"github.com/hashicorp/raft",
		"github.com/hashicorp/memberlist",
		"github.com/modelcontextprotocol",
		"go.opentelemetry.io/otel/sdk", // the API only: the SDK and exporter are the binary's
		"go.opentelemetry.io/otel/exporters",
		module + "/api",
		module + "/cluster",
		module + "/fsm",
	}
	for _, pkg := range []string{".", "../store", "./testdata/libuser"} {
		for _, dep := range goList(t, "-deps", pkg) {
			if dep == module {
				t.Errorf("%s links the root package %s", pkg, module)
			}
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}

// TestPeerImportsNoNode checks that package cluster/peer, the node-to-node
// HTTP protocol, stays beneath the node (docs/design.md, Packages): the
// cluster package imports it, never the reverse, and it links neither the
// runtime nor the API.
func TestPeerImportsNoNode(t *testing.T) {
	for _, dep := range goList(t, "-deps", "../cluster/peer") {
		for _, f := range []string{module + "/cluster", module + "/engine", module + "/api", module + "/embed"} {
			// Its siblings under cluster/ are fine; the rest of each is not.
			if dep == f || f != module+"/cluster" && strings.HasPrefix(dep, f+"/") {
				t.Errorf("cluster/peer links %s", dep)
			}
		}
	}
}

// TestClientLinksNoServer checks that the Go client links the standard
// library and the API's wire types only: a program that calls Carmy
// links no server, framework or consensus.
func TestClientLinksNoServer(t *testing.T) {
	for _, dep := range goList(t, "-deps", "../api/client") {
		switch {
		case dep == module+"/api/client" || dep == module+"/api/wire":
		case strings.HasPrefix(dep, module):
			t.Errorf("api/client links %s", dep)
		case strings.Contains(strings.SplitN(dep, "/", 2)[0], "."):
			t.Errorf("api/client links the module %s", dep)
		}
	}
}

// TestAPIImportsNotTheRoot checks that the API is below the facade: api
// does not import the root package, which assembles it, nor does anything
// the root imports.
func TestAPIImportsNotTheRoot(t *testing.T) {
	t.Parallel()
	if slices.Contains(goList(t, "-deps", "../api"), module) {
		t.Errorf("api imports the root package %s", module)
	}
	for _, dep := range goList(t, "-deps", "..") {
		if dep == module || !strings.HasPrefix(dep, module+"/") {
			continue
		}
		if slices.Contains(goList(t, "-deps", dep), module) {
			t.Errorf("%s, which the root imports, imports the root", dep)
		}
	}
}

// TestAPIDeclaresNoRuntimeTypes checks that api speaks the runtime's
// types rather than declaring its own of the same names (DESIGN.md: no
// package re-declaring another's types to dodge a cycle).
func TestAPIDeclaresNoRuntimeTypes(t *testing.T) {
	runtimeNames := []string{"Caller", "Request", "Response", "ToolInfo", "Resolution", "AnonymousPrincipal"}
	files, err := filepath.Glob("../api/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				var names []*ast.Ident
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names = []*ast.Ident{s.Name}
				case *ast.ValueSpec:
					names = s.Names
				}
				for _, n := range names {
					if slices.Contains(runtimeNames, n.Name) {
						t.Errorf("%s: api declares %s, the runtime's; use engine.%s", fset.Position(n.Pos()), n.Name, n.Name)
					}
				}
			}
		}
	}
}

// TestLibraryLinksNoBackend checks that the root package, the library a
// Go program embeds the runtime with (App, Serve), links no back end: no
// consensus, gossip or PostgreSQL driver, and none of the packages that
// assemble a node (package embed does, for StartNode).
func TestLibraryLinksNoBackend(t *testing.T) {
	forbidden := []string{
		"github.com/hashicorp/raft",
		"github.com/hashicorp/memberlist",
		"github.com/jackc/pgx",
		"go.etcd.io/bbolt",
		module + "/cluster",
		module + "/fsm",
		module + "/store/postgres",
		module + "/mcpgateway",
		module + "/embed",
	}
	for _, dep := range goList(t, "-deps", "..") {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("the root package links %s", dep)
			}
		}
	}
}

// maxLibraryModules bounds the packages outside the standard library and
// this module that the root package links (issue 40): Echo, OpenTelemetry's
// API, go-jose and the JSON Schema validator fit; Prometheus (package
// metrics/prom) and the MCP SDK (package api/mcp) are the node's plugs.
const maxLibraryModules = 60

// TestLibraryBudget pins what the library links: the root package links
// at most maxLibraryModules packages of other modules, and neither it nor
// package api links Prometheus or the MCP SDK.
func TestLibraryBudget(t *testing.T) {
	t.Parallel()
	plugs := []string{"github.com/prometheus/", "github.com/modelcontextprotocol/", module + "/metrics/", module + "/api/mcp"}
	for _, pkg := range []string{"..", "../api"} {
		for _, dep := range goList(t, "-deps", pkg) {
			for _, p := range plugs {
				if strings.HasPrefix(dep, p) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
	var others []string
	for _, dep := range goList(t, "-deps", "..") {
		first := strings.SplitN(dep, "/", 2)[0]
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, module) && !strings.HasPrefix(dep, "vendor/") {
			others = append(others, dep)
		}
	}
	if len(others) > maxLibraryModules {
		t.Errorf("the root package links %d packages of other modules, over %d:\n%s", len(others), maxLibraryModules, strings.Join(others, "\n"))
	}
	t.Logf("the root package links %d packages of other modules", len(others))
}
