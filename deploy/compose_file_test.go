package deploy_test

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// composeFile is what the test reads of compose.yaml (merge keys resolved).
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	PullPolicy      string            `yaml:"pull_policy"`
	Hostname        string            `yaml:"hostname"`
	Command         []string          `yaml:"command"`
	Entrypoint      []string          `yaml:"entrypoint"`
	Environment     map[string]string `yaml:"environment"`
	EnvFile         []string          `yaml:"env_file"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	Profiles        []string          `yaml:"profiles"`
	ReadOnly        bool              `yaml:"read_only"`
	CapDrop         []string          `yaml:"cap_drop"`
	SecurityOpt     []string          `yaml:"security_opt"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	StopSignal      string            `yaml:"stop_signal"`
	User            string            `yaml:"user"`
	Privileged      bool              `yaml:"privileged"`
	NetworkMode     string            `yaml:"network_mode"`
	Healthcheck     *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

var composeVar = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?::?-([^}]*))?\}`)

// expand replaces ${VAR:-default} with its default, as Compose does when
// VAR is not set.
func expand(s string) string {
	return composeVar.ReplaceAllString(s, "$2")
}

// TestComposeFile checks compose.yaml: every node runs `carmy serve` with
// flags and variables carmy knows; its node id, host name and addresses are
// its service's name with carmy's default ports; one node bootstraps, the
// others join existing nodes; the healthcheck is `carmy health` against the
// node's own address; the API is published on 127.0.0.1 only; the files the
// variables name are mounted, read-only, and the node's own; the secure
// posture (node TLS, gossip key from setup's env file, API TLS, tokens)
// holds; the shutdown budget fits stop_grace_period.
func TestComposeFile(t *testing.T) {
	var f composeFile
	if err := yaml.Unmarshal(read(t, "deploy/docker/compose.yaml"), &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	cfg := decodeConfig(t, "deploy/docker/carmy.yaml", read(t, "deploy/docker/carmy.yaml"))
	setupEnv := runSetup(t)
	httpPort, raftPort, gossipPort := defaultPort(t, "http-addr"), defaultPort(t, "raft-addr"), defaultPort(t, "gossip-addr")

	names := slices.Sorted(maps.Keys(f.Services))
	if want := []string{"n1", "n2", "n3", "n4", "n5"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	var bootstrappers, defaults []string
	hostPorts := map[string]string{}
	for _, name := range names {
		s := f.Services[name]
		where := "compose.yaml " + name
		if len(s.Profiles) == 0 {
			defaults = append(defaults, name)
		} else if !slices.Equal(s.Profiles, []string{"scale"}) {
			t.Errorf("%s: profiles %v, want [scale] or none", where, s.Profiles)
		}
		// The image: built here, never pulled, locked down.
		if s.Image != "${CARMY_IMAGE:-carmy:dev}" || s.PullPolicy != "never" {
			t.Errorf("%s: image %q pull_policy %q, want ${CARMY_IMAGE:-carmy:dev}, never (scripts/image builds it)", where, s.Image, s.PullPolicy)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") ||
			s.Privileged || s.User != "" || s.NetworkMode != "" || len(s.Entrypoint) > 0 {
			t.Errorf("%s: want read_only, cap_drop [ALL], no-new-privileges, the image's user and entrypoint, no privileges", where)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d < shutdownBudget || s.StopSignal != "SIGTERM" {
			t.Errorf("%s: stop_grace_period %q stop_signal %q, want %s or more (hand-off, 5 s drain, margin) after SIGTERM", where, s.StopGracePeriod, s.StopSignal, shutdownBudget)
		}
		if s.Hostname != name {
			t.Errorf("%s: hostname %q, want %q (the node binds the addresses its name resolves to)", where, s.Hostname, name)
		}

		// The command line.
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Errorf("%s: command %q, want serve …", where, s.Command)
			continue
		}
		args := parseServeArgs(t, where, s.Command[1:])
		if args.Values["node-id"] != name {
			t.Errorf("%s: --node-id=%q, want the service's name", where, args.Values["node-id"])
		}
		for flag, port := range map[string]int{"http-addr": httpPort, "raft-addr": raftPort, "gossip-addr": gossipPort} {
			if want := net.JoinHostPort(name, strconv.Itoa(port)); args.Values[flag] != want {
				t.Errorf("%s: --%s=%q, want %q", where, flag, args.Values[flag], want)
			}
		}
		switch {
		case args.Has("bootstrap") && args.Has("join"):
			t.Errorf("%s: --bootstrap with --join", where)
		case args.Has("bootstrap"):
			bootstrappers = append(bootstrappers, name)
		case !args.Has("join"):
			t.Errorf("%s: neither --bootstrap nor --join: it would wait to be added by hand", where)
		default:
			for _, addr := range strings.Split(args.Values["join"], ",") {
				host, port, err := net.SplitHostPort(addr)
				peer, ok := f.Services[host]
				if err != nil || !ok || port != strconv.Itoa(httpPort) || host == name || len(peer.Profiles) > 0 {
					t.Errorf("%s: --join address %q is not another default node's HTTP address", where, addr)
				}
			}
		}
		if args.Has("insecure") || args.Has("dev") || args.Has("fast-failover") {
			t.Errorf("%s: --insecure, --dev or --fast-failover has no place here", where)
		}

		// Variables: carmy serve's, or tokens the config names.
		vars := map[string]string{}
		for k, v := range s.Environment {
			vars[k] = v
		}
		if !slices.Equal(s.EnvFile, []string{"${CARMY_SECRETS:-./secrets}/carmy.env"}) {
			t.Errorf("%s: env_file %q, want setup's ${CARMY_SECRETS:-./secrets}/carmy.env", where, s.EnvFile)
		}
		for k, v := range setupEnv {
			if _, dup := vars[k]; dup {
				t.Errorf("%s: %s is both in environment and in setup's carmy.env", where, k)
			}
			vars[k] = v
		}
		for k := range vars {
			if !serveEnv(k) && !slices.Contains(cfg.tokenEnvs(), k) {
				t.Errorf("%s: variable %s: carmy serve reads no such variable, and carmy.yaml names no token by it", where, k)
			}
		}
		for _, k := range cfg.tokenEnvs() {
			if vars[k] == "" && s.Environment[k] == "" {
				t.Errorf("%s: carmy.yaml reads $%s, which neither environment nor setup's carmy.env sets", where, k)
			}
		}
		for _, k := range []string{"CARMY_GOSSIP_KEY", "CARMY_NODE_TLS_CA", "CARMY_NODE_TLS_CERT", "CARMY_NODE_TLS_KEY", "CARMY_TLS_CERT", "CARMY_TLS_KEY", "CARMY_CONFIG", "CARMY_DATA_DIR"} {
			if vars[k] == "" {
				t.Errorf("%s: %s is not set: the secure posture needs it", where, k)
			}
		}

		// Mounts: every file a variable names, read-only; the data dir a
		// named volume of its own, or, for a node of the scale profile, an
		// anonymous one (Compose v1 creates a service's named volumes even
		// while its profile is off).
		mounts := map[string]string{} // target: "source[:ro]"
		for _, v := range s.Volumes {
			parts := strings.Split(expand(v), ":")
			if len(parts) == 1 && parts[0] == vars["CARMY_DATA_DIR"] && len(s.Profiles) > 0 {
				mounts[parts[0]] = "(anonymous)"
				continue
			}
			if len(parts) < 2 {
				t.Errorf("%s: volume %q", where, v)
				continue
			}
			src, dst := parts[0], parts[1]
			ro := len(parts) > 2 && parts[2] == "ro"
			mounts[dst] = src
			if !ro && dst != vars["CARMY_DATA_DIR"] {
				t.Errorf("%s: %s is mounted writable", where, dst)
			}
			if strings.Contains(src, "carmy-ca-key") {
				t.Errorf("%s: the CA's key is mounted (%s): nodes never need it", where, v)
			}
		}
		if src := mounts[vars["CARMY_DATA_DIR"]]; len(s.Profiles) > 0 && src == "(anonymous)" {
			// removed with the container: rm -v
		} else if src != name+"-data" {
			t.Errorf("%s: the data dir %s is on %q, want the named volume %s-data", where, vars["CARMY_DATA_DIR"], src, name)
		} else if _, ok := f.Volumes[src]; !ok {
			t.Errorf("%s: volume %s is not declared", where, src)
		}
		for _, k := range []string{"CARMY_CONFIG", "CARMY_NODE_TLS_CA", "CARMY_NODE_TLS_CERT", "CARMY_NODE_TLS_KEY", "CARMY_TLS_CERT", "CARMY_TLS_KEY"} {
			src, ok := mounts[vars[k]]
			switch {
			case !ok:
				t.Errorf("%s: %s=%s is not mounted", where, k, vars[k])
			case k == "CARMY_CONFIG" && src != "./carmy.yaml":
				t.Errorf("%s: the config comes from %s, want ./carmy.yaml", where, src)
			case strings.HasSuffix(k, "_CERT") && filepath.Base(src) != name+".pem",
				strings.HasSuffix(k, "_KEY") && filepath.Base(src) != name+"-key.pem",
				strings.HasSuffix(k, "_CA") && filepath.Base(src) != "carmy-ca.pem":
				t.Errorf("%s: %s=%s is mounted from %s, not this node's file", where, k, vars[k], src)
			}
		}

		// Published: the API only, on 127.0.0.1 only, each node its own
		// host port.
		if len(s.Ports) != 1 {
			t.Errorf("%s: ports %q, want the API's alone", where, s.Ports)
		}
		for _, p := range s.Ports {
			parts := strings.Split(expand(p), ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" || parts[2] != strconv.Itoa(httpPort) {
				t.Errorf("%s: port %q, want 127.0.0.1:<host port>:%d", where, p, httpPort)
				continue
			}
			if other, dup := hostPorts[parts[1]]; dup {
				t.Errorf("%s and %s publish host port %s", other, name, parts[1])
			}
			hostPorts[parts[1]] = name
		}

		// The healthcheck: carmy health against this node's address, over
		// HTTPS when the API is, trusting the mounted CA.
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 3 || s.Healthcheck.Test[0] != "CMD" || s.Healthcheck.Test[1] != "/carmy" || s.Healthcheck.Test[2] != "health" {
			t.Errorf("%s: healthcheck %+v, want [CMD, /carmy, health, …] (no shell in the image)", where, s.Healthcheck)
			continue
		}
		hc, errs := parseArgs(cli.Health, func(n string) (flagInfo, bool) { f, ok := cli.Health.Flags[n]; return f, ok }, s.Healthcheck.Test[3:])
		for _, err := range errs {
			t.Errorf("%s healthcheck: %v", where, err)
		}
		scheme := "http://"
		if vars["CARMY_TLS_CERT"] != "" {
			scheme = "https://"
		}
		if want := scheme + args.Values["http-addr"]; hc.Values["addr"] != want {
			t.Errorf("%s healthcheck: --addr %q, want %q (the node listens on its own address)", where, hc.Values["addr"], want)
		}
		if hc.Has("live") {
			t.Errorf("%s healthcheck: --live asks %s; healthy means ready (%s)", where, livePath, readyPath)
		}
		if scheme == "https://" && hc.Values["ca-file"] != vars["CARMY_NODE_TLS_CA"] {
			t.Errorf("%s healthcheck: --ca-file %q, want the mounted CA %q", where, hc.Values["ca-file"], vars["CARMY_NODE_TLS_CA"])
		}
	}
	if !slices.Equal(bootstrappers, []string{"n1"}) {
		t.Errorf("nodes with --bootstrap: %v, want [n1] alone", bootstrappers)
	}
	if len(defaults) != 3 {
		t.Errorf("nodes without a profile: %v, want 3", defaults)
	}
}

// runSetup runs deploy/docker/setup with the test's carmy into a temporary
// directory and returns the variables of the carmy.env it wrote, after
// checking the files it made: a CA, a certificate and key per node, the
// keys readable by the image's user and no one else's business.
func runSetup(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	cmd := exec.Command(filepath.Join(root(t), "deploy", "docker", "setup"), "--dir", dir, "n1", "n2", "n3")
	cmd.Env = append(os.Environ(), "CARMY_BIN="+cli.Bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/docker/setup: %v\n%s", err, out)
	}
	// Again: it keeps what is there and adds what is missing.
	before, _ := os.ReadFile(filepath.Join(dir, "carmy.env"))
	cmd = exec.Command(filepath.Join(root(t), "deploy", "docker", "setup"), "--dir", dir, "n4")
	cmd.Env = append(os.Environ(), "CARMY_BIN="+cli.Bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/docker/setup n4: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "carmy.env")); string(after) != string(before) {
		t.Errorf("setup run again rewrote carmy.env")
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the secrets directory: %v %v, want mode 0700", st.Mode(), err)
	}
	for _, f := range []string{"carmy-ca.pem", "carmy-ca-key.pem", "n1.pem", "n1-key.pem", "n2.pem", "n3-key.pem", "n4.pem", "n4-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("setup made no %s: %v", f, err)
		}
	}
	env := map[string]string{}
	raw, err := os.ReadFile(filepath.Join(dir, "carmy.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || v == "" {
			t.Errorf("setup's carmy.env: %q is not NAME=value", line)
			continue
		}
		env[k] = v
	}
	if len(env["CARMY_GOSSIP_KEY"]) != 44 {
		t.Errorf("setup's CARMY_GOSSIP_KEY %q: want carmy keygen's 32 bytes in base64", env["CARMY_GOSSIP_KEY"])
	}
	return env
}
