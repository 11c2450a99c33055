package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// unit is a systemd unit file: section → key → values, in order (a key may
// repeat).
type unit map[string]map[string][]string

// parseUnit reads an ini-style unit: [Section] headers, Key=Value lines,
// # and ; comments, and lines continued by a trailing backslash.
func parseUnit(raw []byte) (unit, error) {
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var cont string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cont != "" {
			line = cont + " " + line
			cont = ""
		}
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`)
			continue
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: %q", n, line)
			}
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				return nil, fmt.Errorf("line %d: %q is not Key=Value in a section", n, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u, sc.Err()
}

// get returns the last value of key in section, and whether it is set.
func (u unit) get(section, key string) (string, bool) {
	vs := u[section][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// envDoc is the environment file: each variable's line (commented out or
// not) and the comment block above it.
type envDoc struct {
	Active  map[string]string // NAME=value lines
	Listed  map[string]bool   // active or "#NAME=value"
	Comment map[string]string // the comment block a variable belongs to
	Order   []string
}

var envLine = regexp.MustCompile(`^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$`)

func parseEnvDoc(raw []byte) envDoc {
	d := envDoc{Active: map[string]string{}, Listed: map[string]bool{}, Comment: map[string]string{}}
	var block []string
	var blockVars []string
	flush := func() {
		for _, v := range blockVars {
			d.Comment[v] = strings.Join(block, "\n")
		}
		block, blockVars = nil, nil
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			flush()
			continue
		}
		if m := envLine.FindStringSubmatch(line); m != nil {
			name := m[2]
			if d.Listed[name] {
				d.Order = append(d.Order, name+" (again)")
			}
			d.Listed[name] = true
			d.Order = append(d.Order, name)
			if m[1] == "" {
				d.Active[name] = strings.Trim(m[3], `"'`)
			}
			blockVars = append(blockVars, name)
			continue
		}
		block = append(block, line)
	}
	flush()
	return d
}

var docDefault = regexp.MustCompile(`\(default ([^)]*)\)`)

// TestSystemdUnit checks carmy.service: the hardening the brief asks for,
// the shutdown budget, the environment file, `carmy serve` with flags carmy
// knows, the state directory carmy.env points the data dir at, and the
// user carmy.sysusers makes. Where systemd-analyze exists, it verifies the
// unit too.
func TestSystemdUnit(t *testing.T) {
	raw := read(t, "deploy/systemd/carmy.service")
	u, err := parseUnit(raw)
	if err != nil {
		t.Fatalf("carmy.service: %v", err)
	}
	want := map[string]string{
		"StateDirectory":        "carmy",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"NoNewPrivileges":       "yes",
		"PrivateTmp":            "yes",
		"CapabilityBoundingSet": "",
		"AmbientCapabilities":   "",
		"Restart":               "on-failure",
		"KillSignal":            "SIGTERM",
		"EnvironmentFile":       "/etc/carmy/carmy.env",
	}
	for k, v := range want {
		if got, ok := u.get("Service", k); !ok || got != v {
			t.Errorf("[Service] %s=%q (set %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := u.get("Service", "LimitNOFILE"); !ok {
		t.Errorf("[Service] LimitNOFILE is not set")
	}
	dyn, _ := u.get("Service", "DynamicUser")
	user, _ := u.get("Service", "User")
	switch {
	case dyn == "yes":
	case user == "" || user == "root":
		t.Errorf("[Service] neither DynamicUser=yes nor a dedicated User= (%q)", user)
	default:
		sysusers := string(read(t, "deploy/systemd/carmy.sysusers"))
		if !regexp.MustCompile(`(?m)^u\s+` + regexp.QuoteMeta(user) + `\s`).MatchString(sysusers) {
			t.Errorf("carmy.sysusers does not make the user %q that User= names", user)
		}
	}
	stop, _ := u.get("Service", "TimeoutStopSec")
	if d, err := time.ParseDuration(stop); err != nil || d < shutdownBudget {
		t.Errorf("[Service] TimeoutStopSec=%q, want %s or more (hand-off, 5 s drain, margin)", stop, shutdownBudget)
	}
	if got, _ := u.get("Install", "WantedBy"); got != "multi-user.target" {
		t.Errorf("[Install] WantedBy=%q", got)
	}

	exec0, _ := u.get("Service", "ExecStart")
	fields := strings.Fields(exec0)
	if len(fields) < 2 || filepath.Base(fields[0]) != "carmy" || !filepath.IsAbs(fields[0]) || fields[1] != "serve" {
		t.Fatalf("ExecStart=%q, want /path/to/carmy serve …", exec0)
	}
	parseServeArgs(t, "carmy.service ExecStart", fields[2:])

	env := parseEnvDoc(read(t, "deploy/systemd/carmy.env"))
	state, _ := u.get("Service", "StateDirectory")
	if got := env.Active["CARMY_DATA_DIR"]; got != "/var/lib/"+state {
		t.Errorf("carmy.env CARMY_DATA_DIR=%q, want the StateDirectory /var/lib/%s", got, state)
	}
	if wd, ok := u.get("Service", "WorkingDirectory"); ok && wd != "/var/lib/"+state {
		t.Errorf("WorkingDirectory=%q is not the state directory", wd)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze here: the unit is not verified by systemd")
		return
	}
	dir := t.TempDir()
	verify := bytes.Replace(raw, []byte("ExecStart="+fields[0]), []byte("ExecStart="+cli.Bin), 1)
	path := filepath.Join(dir, "carmy.service")
	if err := os.WriteFile(path, verify, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "carmy.service") {
			ours = append(ours, line)
		}
	}
	switch {
	case len(ours) > 0:
		t.Errorf("systemd-analyze verify carmy.service: %v\n%s", err, strings.Join(ours, "\n"))
	case err != nil:
		// Not about the unit: this machine's systemd cannot verify here.
		t.Logf("systemd-analyze verify could not run here: %v\n%s", err, out)
	}
}

// TestSystemdEnvFile checks that carmy.env documents every variable carmy
// serve reads, each under a comment naming its flag and its default as
// carmy prints it, lists no variable carmy does not read (but the tokens
// carmy.yaml names, which it sets), and lists each once.
func TestSystemdEnvFile(t *testing.T) {
	env := parseEnvDoc(read(t, "deploy/systemd/carmy.env"))
	cfg := decodeConfig(t, "deploy/systemd/carmy.yaml", read(t, "deploy/systemd/carmy.yaml"))
	for _, name := range env.Order {
		if strings.HasSuffix(name, " (again)") {
			t.Errorf("carmy.env lists %s twice", strings.TrimSuffix(name, " (again)"))
		}
	}
	for _, v := range slices.Sorted(maps.Keys(cli.Serve.Envs)) {
		flag := cli.Serve.Flags[cli.Serve.Envs[v]]
		if !env.Listed[v] {
			t.Errorf("carmy.env does not document %s (--%s): add it, commented out with its default", v, flag.Name)
			continue
		}
		comment := env.Comment[v]
		if !strings.Contains(comment, "--"+flag.Name) {
			t.Errorf("carmy.env: the comment over %s does not name --%s:\n%s", v, flag.Name, comment)
		}
		want := flag.Default
		if want == "" {
			want = "none"
			if flag.Value == "" {
				want = "false"
			}
		}
		m := docDefault.FindStringSubmatch(comment)
		switch {
		case m == nil:
			t.Errorf("carmy.env: the comment over %s gives no (default …); carmy's is %s", v, want)
		case m[1] != want && !sameDuration(m[1], want):
			t.Errorf("carmy.env: %s's documented default %q, carmy's %q", v, m[1], want)
		}
	}
	tokens := cfg.tokenEnvs()
	for _, v := range env.Order {
		if strings.HasSuffix(v, " (again)") {
			continue
		}
		if !serveEnv(v) && !slices.Contains(tokens, v) {
			t.Errorf("carmy.env lists %s: carmy serve reads no such variable, and carmy.yaml names no token by it", v)
		}
	}
	for _, v := range tokens {
		if _, ok := env.Active[v]; !ok {
			t.Errorf("carmy.yaml reads $%s, which carmy.env does not set (uncommented)", v)
		}
	}
	if env.Active["CARMY_CONFIG"] == "" {
		t.Errorf("carmy.env does not set CARMY_CONFIG: without its tokens, a node off loopback refuses to start")
	}
}

func sameDuration(a, b string) bool {
	x, err1 := time.ParseDuration(a)
	y, err2 := time.ParseDuration(b)
	return err1 == nil && err2 == nil && x == y
}
