package deploy_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envBin names a carmy binary to check the files against instead of
// building one (to try a mutated build: go build -overlay …).
const envBin = "CARMY_DEPLOY_BIN"

// Paths and budgets the deploy files must agree on.
const (
	readyPath = "/readyz"  // readiness: leader known, log caught up
	livePath  = "/healthz" // liveness: the process serves
	// shutdownBudget is what a node needs after SIGTERM: leadership
	// hand-off, up to 5 s for running tools, and a margin (carmy exits
	// within about 15 s).
	shutdownBudget = 20 * time.Second
	// imageUser is the Dockerfile's USER.
	imageUser = 65532
)

// flagInfo is one flag of a carmy command, as its usage prints it.
type flagInfo struct {
	Name    string // without dashes
	Value   string // the value's name, "" for a boolean flag
	Default string // "" when none is printed
	Env     string // its variable, "" when none
}

// command is a carmy command's flags, by name, and its variables.
type command struct {
	Name  string
	Flags map[string]flagInfo
	Envs  map[string]string // variable: flag name
}

// carmy is what the tests know of the binary: its path and commands.
type carmyCLI struct {
	Bin     string
	Serve   command
	Health  command
	Cluster command
	TLS     command
}

var cli *carmyCLI

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "carmy-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	c, err := loadCLI(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		return 1
	}
	cli = c
	return m.Run()
}

// loadCLI builds carmy into dir (or takes $CARMY_DEPLOY_BIN) and reads the
// usage of serve, health, cluster and tls.
func loadCLI(dir string) (*carmyCLI, error) {
	bin := os.Getenv(envBin)
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		bin = filepath.Join(dir, "carmy")
		build := exec.Command("go", "build", "-o", bin, "./cmd/carmy")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building carmy: %w\n%s", err, out)
		}
	}
	c := &carmyCLI{Bin: bin}
	for _, x := range []struct {
		dst  *command
		name string
		args []string
	}{
		{&c.Serve, "serve", []string{"help", "serve"}},
		{&c.Health, "health", []string{"health", "--help"}},
		{&c.Cluster, "cluster", []string{"help", "cluster"}},
		{&c.TLS, "tls", []string{"tls", "--help"}},
	} {
		out, err := exec.Command(bin, x.args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("carmy %s: %w\n%s", strings.Join(x.args, " "), err, out)
		}
		*x.dst = parseUsage(x.name, string(out))
		if len(x.dst.Flags) == 0 {
			return nil, fmt.Errorf("carmy %s printed no flag lines (\"  --name …\"): has its format changed?\n%s", strings.Join(x.args, " "), out)
		}
	}
	return c, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}

// root returns the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	r, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// read returns the file at path (relative to the module root).
func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	flagLine = regexp.MustCompile(`^  --([a-z0-9][a-z0-9-]*)(?: ([^\s-]\S*))?\s+(.*)$`)
	envMark  = regexp.MustCompile(`\[\$([A-Z][A-Z0-9_]*)\]\s*$`)
	defMark  = regexp.MustCompile(`\(default ([^()]*)\)`)
)

// parseUsage reads the flag lines of a usage text: "  --name value  usage
// (default d) [$ENV]". A bool flag has no value name.
func parseUsage(name, text string) command {
	c := command{Name: name, Flags: map[string]flagInfo{}, Envs: map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := flagInfo{Name: m[1], Value: m[2]}
		if e := envMark.FindStringSubmatch(line); e != nil {
			f.Env = e[1]
			c.Envs[f.Env] = f.Name
		}
		if d := defMark.FindAllStringSubmatch(m[3], -1); d != nil {
			f.Default = d[len(d)-1][1] // the printed default comes last
		}
		c.Flags[f.Name] = f
	}
	return c
}

// serveFlag returns serve's flag name.
func serveFlag(name string) (flagInfo, bool) {
	f, ok := cli.Serve.Flags[name]
	return f, ok
}

// serveEnv reports whether carmy serve reads the variable.
func serveEnv(env string) bool {
	_, ok := cli.Serve.Envs[env]
	return ok
}

// defaultPort returns the port of a serve address flag's default
// (127.0.0.1:8080 → 8080).
func defaultPort(t *testing.T, flag string) int {
	t.Helper()
	f, ok := cli.Serve.Flags[flag]
	if !ok {
		t.Fatalf("carmy serve has no --%s", flag)
	}
	_, port, err := net.SplitHostPort(f.Default)
	if err != nil {
		t.Fatalf("--%s's default %q: %v", flag, f.Default, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// parsedArgs is a command line checked against a command's flags.
type parsedArgs struct {
	Values map[string]string // flag name: value ("true" for a bare bool)
	Order  []string
}

func (p parsedArgs) Has(name string) bool { _, ok := p.Values[name]; return ok }

// parseArgs checks args (after the command's name) against cmd's flags and
// returns their values. Unknown flags and stray arguments are errors; so
// is a flag given twice.
func parseArgs(cmd command, lookup func(string) (flagInfo, bool), args []string) (parsedArgs, []error) {
	p := parsedArgs{Values: map[string]string{}}
	var errs []error
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			errs = append(errs, fmt.Errorf("carmy %s: unexpected argument %q", cmd.Name, a))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := lookup(name)
		if !ok {
			errs = append(errs, fmt.Errorf("carmy %s has no flag --%s (in %q)", cmd.Name, name, a))
			continue
		}
		if !hasValue {
			if f.Value == "" {
				value = "true"
			} else if i+1 < len(args) {
				i++
				value = args[i]
			} else {
				errs = append(errs, fmt.Errorf("carmy %s: --%s needs a value", cmd.Name, name))
			}
		}
		if _, dup := p.Values[name]; dup {
			errs = append(errs, fmt.Errorf("carmy %s: --%s given twice", cmd.Name, name))
		}
		p.Values[name] = value
		p.Order = append(p.Order, name)
	}
	return p, errs
}

// parseServeArgs checks a `carmy serve` command line (without "serve").
func parseServeArgs(t *testing.T, where string, args []string) parsedArgs {
	t.Helper()
	p, errs := parseArgs(cli.Serve, serveFlag, args)
	for _, err := range errs {
		t.Errorf("%s: %v", where, err)
	}
	return p
}

// TestCLI checks that the usage texts were read: the flags every deploy
// file leans on, with variables and defaults.
func TestCLI(t *testing.T) {
	if n := len(cli.Serve.Flags); n < 20 {
		t.Errorf("read %d flags of carmy serve, want 20 or more: %v", n, slices.Sorted(maps.Keys(cli.Serve.Flags)))
	}
	for _, name := range []string{"node-id", "data-dir", "http-addr", "raft-addr", "gossip-addr", "bootstrap", "join", "config",
		"gossip-key", "node-tls-ca", "node-tls-cert", "node-tls-key", "tls-cert", "tls-key"} {
		f, ok := cli.Serve.Flags[name]
		if !ok || f.Env == "" {
			t.Errorf("carmy serve --%s: %+v, want a flag with a variable", name, f)
		}
	}
	if f := cli.Serve.Flags["bootstrap"]; f.Value != "" {
		t.Errorf("--bootstrap read as taking a value %q", f.Value)
	}
	for flag, want := range map[string]int{"http-addr": 8080, "raft-addr": 8300, "gossip-addr": 8301} {
		if got := defaultPort(t, flag); got != want {
			t.Errorf("--%s defaults to port %d; the deploy files assume %d", flag, got, want)
		}
	}
	for _, name := range []string{"addr", "ca-file", "live"} {
		if _, ok := cli.Health.Flags[name]; !ok {
			t.Errorf("carmy health has no --%s", name)
		}
	}
	for _, name := range []string{"addr", "ca-file", "token", "id", "raft-addr", "http-addr"} {
		if _, ok := cli.Cluster.Flags[name]; !ok {
			t.Errorf("carmy cluster has no --%s", name)
		}
	}
	t.Logf("carmy serve: %d flags; %s", len(cli.Serve.Flags), runtime.Version())
}
