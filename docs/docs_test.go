package docs

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestDocs runs the shell blocks of the documentation as a reader would,
// and checks the outputs the documentation shows.
//
// Which blocks: in a Markdown file, the ```sh blocks between a marker
// comment <!-- doc-test: NAME --> and <!-- doc-test: end -->. Each block is
// cut into steps: command lines (continuations and trailing comments
// included), then the comment lines that follow them, which show their
// output. All the steps of one document run in order in one bash process,
// so variables and background jobs (a `… &` and a later `kill $!`) carry
// over from step to step, as in a terminal. A step must exit 0.
//
// How outputs are checked, loosely, line by line of the shown output:
//   - `HTTP/1.1 409 Conflict`: the output has a status line with 409;
//   - `Name: value`: the output has that header (case-insensitive name);
//   - a JSON line (`{…` or `"…`): every `"key":value` pair in it whose
//     value is a string, a number, true, false or null is in the output as
//     written, except values holding `…` (elided: ids, hashes) and keys
//     ending in `_at` (timestamps);
//   - any other line without `…`: the output contains it.
//
// The documents:
//   - quickstart (README.md): a `carmy serve --dev` of a fresh build on free
//     loopback ports, with its own data dir; `localhost:8080` in the
//     commands is rewritten to that node's address, so a node a user left
//     on 8080 is never touched.
//   - cluster (docs/cluster.md): scripts/cluster, with CARMY_CLUSTER_DIR in
//     a temporary directory;
//   - local-cluster, secure-cluster (examples/README.md) and gateway
//     (examples/gateway/README.md): the examples' scripts and commands,
//     CARMY_EXAMPLE_DIR in a temporary directory, CARMY_BIN the fresh build;
//   - postgres (examples/postgres/README.md): a PostgreSQL server of the
//     reader's own in CARMY_EXAMPLE_DIR, and the example against it; skipped,
//     loudly, without PostgreSQL's programs. initdb and postgres refuse to
//     run as root: as root the README's steps run them as the user postgres
//     themselves (examples/postgres/as-root), as a reader's would.
//
// All but quickstart name their ports through `$(port N)` (scripts/ports), which
// CARMY_PORT_BASE moves. Each runs with a CARMY_PORT_BASE of its own whose
// ports are all free (the shown outputs' ports are moved alike), so they
// run beside each other and beside whatever a user left running. A
// command that names one of its document's ports literally fails the
// test: with another base it would reach the wrong process. With
// CARMY_PORT_BASE set in the environment, the documents run on that base,
// and one whose ports are taken is skipped, loudly, saying which; nothing
// another process runs is stopped. `carmy` in a command is the fresh build
// (first on PATH). Skipped with -short.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestDocs builds carmy and starts nodes")
	}
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipLoudly(t, "%s is not on PATH: the documentation's commands need it", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The one build of the package's tests (TestMain runs through
	// testutil): its directory holds nothing but carmy.
	bin := testutil.BuildCarmy(t)
	binDir := filepath.Dir(bin)
	env := append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	t.Run("quickstart", func(t *testing.T) {
		t.Parallel()
		steps := stepsOf(t, filepath.Join(root, "README.md"), "quickstart")
		addr := startDevNode(t, bin)
		for i := range steps {
			steps[i].cmd = strings.ReplaceAll(steps[i].cmd, "localhost:8080", addr)
		}
		runSteps(t, root, env, steps, "")
	})
	for _, d := range []struct {
		name, file string
		ports      []int
		env        string // the directory variable
		cleanup    string
	}{
		{"cluster", "docs/cluster.md", []int{8081, 8082, 8083, 8084, 8311, 8312, 8313, 8314, 8411, 8412, 8413, 8414},
			"CARMY_CLUSTER_DIR", `[ -n "${NODE4:-}" ] && kill $NODE4 2>/dev/null; scripts/cluster clean`},
		{"local-cluster", "examples/README.md", []int{7070, 7081, 7082, 7083, 7311, 7312, 7313, 7411, 7412, 7413},
			"CARMY_EXAMPLE_DIR", "examples/local-cluster/cluster clean"},
		{"secure-cluster", "examples/README.md", []int{7091, 7092, 7093, 7321, 7322, 7323, 7421, 7422, 7423},
			"CARMY_EXAMPLE_DIR", "examples/secure-cluster/cluster clean"},
		{"gateway", "examples/gateway/README.md", []int{7100, 7330, 7430},
			"CARMY_EXAMPLE_DIR", "examples/gateway/run clean"},
		{"postgres", "examples/postgres/README.md", []int{7110, 7111},
			"", `[ -n "${EXAMPLE:-}" ] && kill $EXAMPLE 2>/dev/null; [ -n "${PG:-}" ] && pg_ctl -D "$PG/db" -m immediate -w stop >/dev/null 2>&1; true`},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			steps := stepsOf(t, filepath.Join(root, d.file), d.name)
			e := slices.Clip(env) // a copy: subtests run in parallel
			if d.env != "" {
				e = append(e, d.env+"="+t.TempDir())
			}
			if d.name == "postgres" {
				e = postgresEnv(t, e)
			}
			base := portBase(t, d.ports)
			for i := range steps {
				if p, ok := literalPort(steps[i].cmd, d.ports); ok {
					t.Fatalf("%s line %d names port %d literally; write $(port %d), which CARMY_PORT_BASE moves", d.file, steps[i].line, p, p)
				}
				for j := range steps[i].want {
					steps[i].want[j] = movePorts(steps[i].want[j], base, d.ports)
				}
			}
			e = append(e, "CARMY_BIN="+bin, fmt.Sprintf("CARMY_PORT_BASE=%d", base))
			runSteps(t, root, e, steps, d.cleanup)
		})
	}
}

// postgresEnv returns env for the postgres document: PostgreSQL's programs
// on PATH (skipping t, loudly, without them) and CARMY_EXAMPLE_DIR in a new
// directory the server's user may write; as root, initdb and pg_ctl are
// wrappers that run the real ones as an unprivileged user.
func postgresEnv(t *testing.T, env []string) []string {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("initdb"); err == nil {
		bin = filepath.Dir(p)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			bin = filepath.Dir(real)
		}
	} else if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		bin = dirs[len(dirs)-1]
	}
	for _, prog := range []string{"initdb", "pg_ctl", "postgres", "createdb", "psql"} {
		if _, err := os.Stat(filepath.Join(bin, prog)); err != nil {
			if _, err := exec.LookPath(prog); err != nil {
				testutil.SkipLoudly(t, "no %s (PostgreSQL's programs; Debian: apt-get install postgresql): the postgres example's commands need it", prog)
			}
		}
	}
	dir, err := os.MkdirTemp("/tmp", "carmy-docs-pg-") // short: the socket's path has a bound
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg := filepath.Join(dir, "example")
	if err := os.Mkdir(pg, 0o700); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if bin != "" {
		path += string(os.PathListSeparator) + bin
	}
	return append(env, "PATH="+path, "CARMY_EXAMPLE_DIR="+pg, "LC_ALL=C", "LANG=C")
}

// A step is some command lines and the output the document shows for them.
type step struct {
	line int    // of the first command, in the file
	cmd  string // the command lines, as written
	want []string
}

// stepsOf returns the steps of the ```sh blocks of path between the
// markers of name.
func stepsOf(t *testing.T, path, name string) []step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	in, block, found := false, false, false
	var cur *step
	flush := func() {
		if cur != nil && cur.cmd != "" {
			steps = append(steps, *cur)
		}
		cur = nil
	}
	for i, line := range strings.Split(string(b), "\n") {
		trim := strings.TrimSpace(line)
		switch {
		case trim == "<!-- doc-test: "+name+" -->":
			in, found = true, true
			continue
		case in && trim == "<!-- doc-test: end -->":
			in = false
			continue
		case !in:
			continue
		case strings.HasPrefix(trim, "```"):
			block = !block && trim == "```sh"
			flush()
			continue
		case !block:
			continue
		}
		switch {
		case trim == "":
			flush()
		case strings.HasPrefix(trim, "#"):
			if cur != nil {
				cur.want = append(cur.want, strings.TrimSpace(strings.TrimPrefix(trim, "#")))
			}
		default:
			if cur != nil && len(cur.want) > 0 {
				flush()
			}
			if cur == nil {
				cur = &step{line: i + 1}
			}
			cur.cmd += line + "\n"
		}
	}
	flush()
	if !found || len(steps) == 0 {
		t.Fatalf("%s: no ```sh block after <!-- doc-test: %s -->", path, name)
	}
	return steps
}

// runSteps runs steps in one bash process in dir, then cleanup in the same
// process (also when a step fails).
func runSteps(t *testing.T, dir string, env []string, steps []step, cleanup string) {
	t.Helper()
	sh := startShell(t, dir, env)
	defer func() {
		if cleanup != "" {
			if out, code := sh.run(cleanup, 2*time.Minute); code != 0 {
				t.Errorf("cleanup %q exited %d:\n%s", cleanup, code, out)
			}
		}
		sh.close()
	}()
	for _, s := range steps {
		out, code := sh.run(s.cmd, 2*time.Minute)
		if code != 0 {
			t.Fatalf("line %d exited %d:\n%s\noutput:\n%s", s.line, code, s.cmd, out)
		}
		for _, w := range s.want {
			if msg := check(w, out); msg != "" {
				t.Errorf("line %d: %s\ncommand:\n%s\noutput:\n%s", s.line, msg, s.cmd, out)
			}
		}
	}
}

var (
	statusLine = regexp.MustCompile(`^HTTP/\S+ (\d{3})\b`)
	headerLine = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*): (\S.*)$`)
	jsonPair   = regexp.MustCompile(`"([^"\\]+)":("(?:[^"\\]|\\.)*"|true|false|null|-?[0-9][0-9.eE+-]*)`)
)

// check returns what out lacks of the shown output line want, or "".
func check(want, out string) string {
	switch {
	case statusLine.MatchString(want):
		code := statusLine.FindStringSubmatch(want)[1]
		if !regexp.MustCompile(`(?m)^HTTP/\S+ ` + code + `\b`).MatchString(out) {
			return "no HTTP status " + code
		}
	case strings.HasPrefix(want, "{") || strings.HasPrefix(want, `"`):
		for _, m := range jsonPair.FindAllStringSubmatch(want, -1) {
			if strings.Contains(m[2], "…") || strings.HasSuffix(m[1], "_at") {
				continue
			}
			if pair := `"` + m[1] + `":` + m[2]; !strings.Contains(out, pair) {
				return "no " + pair
			}
		}
	case headerLine.MatchString(want):
		m := headerLine.FindStringSubmatch(want)
		re := regexp.MustCompile(`(?mi)^` + regexp.QuoteMeta(m[1]) + `: ` + regexp.QuoteMeta(m[2]) + `\r?$`)
		if !re.MatchString(out) {
			return "no header " + want
		}
	case !strings.Contains(want, "…"):
		if !strings.Contains(out, want) {
			return "no " + want
		}
	}
	return ""
}

// shell is a bash process that runs steps one after another, like a
// terminal.
type shell struct {
	cmd   *exec.Cmd
	stdin *os.File
	lines chan string
	n     int
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	w.Close()
	sh := &shell{cmd: cmd, stdin: inW, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
		r.Close()
	}()
	return sh
}

// run runs command lines and returns their output and exit status (-1
// when they did not finish within timeout).
func (sh *shell) run(cmd string, timeout time.Duration) (string, int) {
	sh.n++
	mark := fmt.Sprintf("__doc_test_step_%d__", sh.n)
	fmt.Fprintf(sh.stdin, "%s\nprintf '\\n%s %%d\\n' $?\n", strings.TrimRight(cmd, "\n"), mark)
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-sh.lines:
			if !ok {
				return out.String(), -1
			}
			if rest, found := strings.CutPrefix(line, mark+" "); found {
				var code int
				fmt.Sscan(rest, &code)
				return out.String(), code
			}
			out.WriteString(line + "\n")
		case <-deadline:
			return out.String() + fmt.Sprintf("(no end after %s)\n", timeout), -1
		}
	}
}

func (sh *shell) close() {
	sh.stdin.Close()
	done := make(chan struct{})
	go func() { sh.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		sh.cmd.Process.Kill()
		<-done
	}
}

// needPorts skips the test, loudly, when one of the loopback ports is
// taken.
func needPorts(t *testing.T, ports ...int) {
	t.Helper()
	var busy []string
	for _, p := range ports {
		if !portFree(p) {
			busy = append(busy, fmt.Sprint(p))
		}
	}
	if len(busy) > 0 {
		testutil.SkipLoudly(t, "ports in use on 127.0.0.1 by another program: %s; this document's commands need them with CARMY_PORT_BASE=%s (nothing was stopped; unset CARMY_PORT_BASE to let the test pick free ports)",
			strings.Join(busy, ", "), os.Getenv("CARMY_PORT_BASE"))
	}
}

// portFree reports whether nothing listens on 127.0.0.1:p, TCP or UDP (a
// node's gossip port is both), and p may be bound.
func portFree(p int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// The scripts' ports are CARMY_PORT_BASE + (N - defaultBase), N from
// defaultBase+70 to defaultBase+1414 (scripts/ports).
const (
	defaultBase = 7000
	baseSpan    = 1500
)

// bases are the CARMY_PORT_BASE values this process handed out, so that
// documents running in parallel never share a port.
var bases struct {
	sync.Mutex
	taken []int
}

// portBase returns the CARMY_PORT_BASE a document with ports runs on: the
// environment's (skipping t loudly when one of them is taken there), or
// one whose moved ports are all free, below the kernel's ephemeral range,
// away from the bases other documents of this run hold.
func portBase(t *testing.T, ports []int) int {
	t.Helper()
	if v := os.Getenv("CARMY_PORT_BASE"); v != "" {
		base, err := strconv.Atoi(v)
		if err != nil || base < 1024 || base > 64000 {
			t.Fatalf("CARMY_PORT_BASE=%q: want a number between 1024 and 64000", v)
		}
		needPorts(t, movedAll(base, ports)...)
		return base
	}
	bases.Lock()
	defer bases.Unlock()
next:
	for range 300 {
		base := 10000 + rand.IntN(200)*100 // up to 29,900 + 1,414: below 32,768
		for _, b := range bases.taken {
			if base > b-baseSpan && base < b+baseSpan {
				continue next
			}
		}
		for _, p := range movedAll(base, ports) {
			if !portFree(p) {
				continue next
			}
		}
		bases.taken = append(bases.taken, base)
		return base
	}
	t.Fatalf("no CARMY_PORT_BASE from 10000 to 29900 with the ports %v free", ports)
	return 0
}

func moved(base, p int) int { return base + p - defaultBase }

func movedAll(base int, ports []int) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		out[i] = moved(base, p)
	}
	return out
}

var hostPort = regexp.MustCompile(`(127\.0\.0\.1|localhost):(\d{4,5})\b`)

// movePorts rewrites a shown output's host:port pairs that name one of
// ports to where base puts them.
func movePorts(s string, base int, ports []int) string {
	return hostPort.ReplaceAllStringFunc(s, func(m string) string {
		sub := hostPort.FindStringSubmatch(m)
		p, _ := strconv.Atoi(sub[2])
		if !slices.Contains(ports, p) {
			return m
		}
		return fmt.Sprintf("%s:%d", sub[1], moved(base, p))
	})
}

// literalPort returns a port of ports that cmd names as host:port rather
// than through $(port N); comments (from " #" on) are not commands.
func literalPort(cmd string, ports []int) (int, bool) {
	for _, line := range strings.Split(cmd, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		for _, m := range hostPort.FindAllStringSubmatch(line, -1) {
			if p, _ := strconv.Atoi(m[2]); slices.Contains(ports, p) {
				return p, true
			}
		}
	}
	return 0, false
}

// freePort returns a loopback port nobody listens on (TCP), for a moment.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDevNode starts `carmy serve --dev` on free loopback ports with a
// data dir of its own, waits until it is ready, and returns its HTTP
// address; the node gets SIGTERM at the end of the test.
func startDevNode(t *testing.T, bin string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--dev", "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", addr,
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("carmy serve --dev exited: %v\n%s", err, log)
		case <-ctx.Done():
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("carmy serve --dev not ready within 30s:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestCheck pins how a shown output line is compared with the real one.
func TestCheck(t *testing.T) {
	out := "HTTP/1.1 409 Conflict\r\nRetry-After: 1\r\n\r\n" +
		`{"error":{"code":"EXECUTION_UNCERTAIN","execution_id":"exec_06H3","status":"running"},"started_at":"2026-12-02T00:14:26.974Z"}` + "\nRemoved node4.\n"
	for _, c := range []struct {
		want string
		ok   bool
	}{
		{"HTTP/1.1 409 Conflict", true},
		{"HTTP/1.1 200 OK", false},
		{"Retry-After: 1", true},
		{"Idempotent-Replayed: true", false},
		{`{"error":{"code":"EXECUTION_UNCERTAIN","execution_id":"exec_06H2P3SR…","message":"…","status":"running"}}`, true},
		{`{"error":{"code":"IDEMPOTENCY_CONFLICT"}}`, false},
		{`"status":"completed", "started_at":"2026-11-30T06:05:47.334Z"`, false},
		{`"started_at":"2026-11-30T06:05:47.334Z"`, true},
		{"Removed node4.", true},
		{"Removed node5.", false},
		{"whatever …", true},
	} {
		if got := check(c.want, out) == ""; got != c.ok {
			t.Errorf("check(%q) passes: %v, want %v", c.want, got, c.ok)
		}
	}
}

// TestPortRewrite pins how a document's ports move with CARMY_PORT_BASE.
func TestPortRewrite(t *testing.T) {
	ports := []int{8081, 8314}
	got := movePorts(`{"http_addr":"127.0.0.1:8081","raft_addr":"127.0.0.1:8314"} localhost:8081 127.0.0.1:8080`, 20000, ports)
	want := `{"http_addr":"127.0.0.1:21081","raft_addr":"127.0.0.1:21314"} localhost:21081 127.0.0.1:8080`
	if got != want {
		t.Errorf("movePorts = %s\nwant       %s", got, want)
	}
	for cmd, literal := range map[string]bool{
		"curl -s localhost:$(port 8081)/v1/cluster   # node1, 127.0.0.1:8081\n": false,
		"carmy health --addr 127.0.0.1:8081\n":                                  true,
		"curl -s localhost:8080/healthz\n":                                      false, // not the document's
	} {
		if _, ok := literalPort(cmd, ports); ok != literal {
			t.Errorf("literalPort(%q) = %v, want %v", cmd, ok, literal)
		}
	}
}
