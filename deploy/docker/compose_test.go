package docker_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// envCompose is "off" to skip TestCompose.
const envCompose = "CARMY_COMPOSE_TEST"

// settle bounds each wait for the cluster to form or a node to be healthy
// again (two cores may run the robustness harness at the same time).
const settle = 120 * time.Second

// TestCompose runs compose.yaml as README.md here describes, under a
// project name of its own, with its secrets made by ./setup in a temporary
// directory and every API port published on a free port of 127.0.0.1:
//
//   - the three nodes form one cluster, each healthy by its own healthcheck
//     (`carmy health`) and ready from the host over HTTPS checked against
//     the cluster CA; a plain-HTTP request and a call without a token are
//     refused (the secure posture holds); the image holds a CA bundle;
//   - every node takes a call, and another node replays it (replayed: true,
//     the same execution);
//   - `docker compose restart n2`: n2 comes back healthy, in the cluster,
//     and replays calls taken before its restart; a call through it is
//     replayed elsewhere;
//   - scale to five (the "scale" profile's n4 and n5 join by themselves),
//     then back to three: n5 removed with `carmy cluster remove` inside n1's
//     container, n4 with DELETE /v1/cluster/nodes/n4 from the host, both
//     containers and volumes removed;
//   - `docker compose down -v` (in Cleanup, also on failure) leaves no
//     container, network or volume of the project.
func TestCompose(t *testing.T) {
	if os.Getenv(envCompose) == "off" {
		t.Skipf("%s=off", envCompose)
	}
	if testing.Short() {
		t.Skip("builds the image and runs a cluster of containers")
	}
	testutil.LongTier(t, "the Compose cluster")
	composeCmd := dockertest.NeedCompose(t, "THE COMPOSE CLUSTER TEST (deploy/docker)")
	begin := time.Now()
	image := dockertest.BuildImage(t)
	bin := testutil.BuildCarmy(t)
	built := time.Since(begin)

	root := testutil.ModuleRoot(t)
	dir := filepath.Join(root, "deploy", "docker")
	secrets := filepath.Join(t.TempDir(), "secrets")
	setup := exec.Command(filepath.Join(dir, "setup"), "--dir", secrets)
	setup.Env = append(os.Environ(), "CARMY_BIN="+bin)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("deploy/docker/setup: %v\n%s", err, out)
	}
	s := newStack(t, composeCmd, dir, "compose.yaml", secrets, image)
	t.Logf("compose %v, project %s, image %s (image and binary built in %s)", composeCmd, s.project, image, built.Round(time.Millisecond))

	step := time.Now()
	lap := func(what string) {
		t.Logf("%s: %s", what, time.Since(step).Round(time.Millisecond))
		step = time.Now()
	}
	s.must("up", "--detach")
	three := []string{"n1", "n2", "n3"}
	s.waitFormed(three)
	lap("up, healthy and formed")
	// The scale profile's nodes are off: nothing of theirs exists, not
	// even a volume (Compose v1 made named volumes of services whose
	// profile was off).
	vols, err := s.docker("volume", "ls", "--format", "{{.Name}}", "--filter", "label=com.docker.compose.project="+s.project)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range strings.Fields(vols) {
		if strings.Contains(v, "n4") || strings.Contains(v, "n5") {
			t.Errorf("volume %s exists while the scale profile is off (volumes: %s)", v, vols)
		}
	}

	// The posture: HTTPS only, tokens required. The image trusts the
	// public CAs for HTTP tools (scripts/image copied the bundle in).
	s.checkRefusals("n1")
	s.checkCABundle("n1")

	// Every node takes a call; the next one replays it.
	first := map[string]callResult{}
	for i, n := range three {
		id := "compose-" + n
		first[n] = s.mustCall(n, id, false, "")
		s.mustCall(three[(i+1)%3], id, true, first[n].ExecutionID)
	}
	lap("calls and replays")

	// A restarted node rejoins from its volume and replays.
	before := s.startedAt("n2")
	s.must("restart", "n2")
	s.forget("n2")
	if after := s.startedAt("n2"); after == before {
		t.Fatalf("n2 still runs since %s after compose restart", before)
	}
	s.waitFormed(three)
	for _, n := range three {
		s.mustCall("n2", "compose-"+n, true, first[n].ExecutionID)
	}
	after := s.mustCall("n2", "compose-after-restart", false, "")
	s.mustCall("n3", "compose-after-restart", true, after.ExecutionID)
	lap("restart of n2")

	// Scale to five, then back to three.
	s.must("--profile", "scale", "up", "--detach", "n4", "n5")
	five := []string{"n1", "n2", "n3", "n4", "n5"}
	s.waitFormed(five)
	s.mustCall("n5", "compose-n1", true, first["n1"].ExecutionID)
	s.mustCall("n4", "compose-after-restart", true, after.ExecutionID)
	lap("scaled to five")
	s.must("exec", "-T", "n1", "/carmy", "cluster", "remove", "n5",
		"--addr", "https://n1:8080", "--ca-file", "/run/secrets/carmy-ca.pem")
	if code, body, err := s.do(http.MethodDelete, "n1", "/v1/cluster/nodes/n4", s.adminToken, nil); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE /v1/cluster/nodes/n4: %d %s %v", code, body, err)
	}
	// -v: their anonymous data volumes go with them, as README.md here says.
	s.must("--profile", "scale", "rm", "--stop", "--force", "-v", "n4", "n5")
	s.waitFormed(three)
	s.mustCall("n3", "compose-n2", true, first["n2"].ExecutionID)
	lap("scaled back to three")
}

// stack is one Compose project of a file of deploy/docker.
type stack struct {
	t       *testing.T
	cmd     []string // docker compose, or docker-compose
	dir     string   // deploy/docker
	file    string   // compose.yaml, compose.postgres.yaml
	project string
	env     []string
	client  *http.Client

	adminToken, agentToken string

	mu   sync.Mutex
	urls map[string]string // service: its API's URL on the host
}

func newStack(t *testing.T, cmd []string, dir, file, secrets, image string, extraEnv ...string) *stack {
	t.Helper()
	env, err := readEnvFile(filepath.Join(secrets, "carmy.env"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(secrets, "carmy-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("carmy-ca.pem holds no certificate")
	}
	dockertest.Prepare(t)
	s := &stack{
		t: t, cmd: cmd, dir: dir, file: file,
		project: dockertest.ProjectName("compose-test"),
		env: append(append(os.Environ(), "CARMY_IMAGE="+image, "CARMY_SECRETS="+secrets, "COMPOSE_PROFILES=",
			"CARMY_N1_PORT=0", "CARMY_N2_PORT=0", "CARMY_N3_PORT=0", "CARMY_N4_PORT=0", "CARMY_N5_PORT=0"), extraEnv...),
		client: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
		adminToken: env["CARMY_ADMIN_TOKEN"],
		agentToken: env["CARMY_AGENT_TOKEN"],
		urls:       map[string]string{},
	}
	if s.adminToken == "" || s.agentToken == "" {
		t.Fatalf("setup wrote no CARMY_ADMIN_TOKEN or CARMY_AGENT_TOKEN: %v", slices.Sorted(maps.Keys(env)))
	}
	dockertest.RegisterProject(s.project)
	t.Cleanup(s.down)
	return s
}

// readEnvFile reads NAME=value lines, skipping comments and blank lines.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: not NAME=value: %q", path, line)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// compose runs Compose on the project with args and returns its standard
// output, trimmed.
func (s *stack) compose(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append(slices.Clone(s.cmd[1:]), "--project-name", s.project, "--file", filepath.Join(s.dir, s.file))
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, s.cmd[0], argv...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", strings.Join(s.cmd, " "), strings.Join(argv[len(s.cmd)-1:], " "), err, stderr.Bytes(), stdout.Bytes())
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (s *stack) must(args ...string) string {
	s.t.Helper()
	out, err := s.compose(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// down takes the project down with its volumes, then checks by label that
// nothing of it is left (removing what is, by id).
func (s *stack) down() {
	t := s.t
	if t.Failed() {
		if logs, err := s.compose("--profile", "scale", "logs", "--no-color", "--tail", "60"); err == nil {
			t.Logf("compose logs:\n%s", logs)
		} else {
			t.Log(err)
		}
		if ps, err := s.compose("--profile", "scale", "ps"); err == nil {
			t.Logf("compose ps:\n%s", ps)
		}
	}
	start := time.Now()
	if _, err := s.compose("--profile", "scale", "down", "--volumes", "--remove-orphans", "--timeout", "20"); err != nil {
		t.Errorf("compose down: %v", err)
	}
	filter := "label=com.docker.compose.project=" + s.project
	for _, kind := range []struct{ list, remove []string }{
		{[]string{"ps", "--all", "--quiet", "--filter", filter}, []string{"rm", "--force", "--volumes"}},
		{[]string{"network", "ls", "--quiet", "--filter", filter}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "--quiet", "--filter", filter}, []string{"volume", "rm", "--force"}},
	} {
		out, err := s.docker(kind.list...)
		if err != nil {
			t.Errorf("listing what project %s left: %v", s.project, err)
			continue
		}
		if ids := strings.Fields(out); len(ids) > 0 {
			t.Errorf("compose down left %s %v behind; removing them", kind.list[0], ids)
			if _, err := s.docker(append(kind.remove, ids...)...); err != nil {
				t.Error(err)
			}
		}
	}
	t.Logf("down: %s", time.Since(start).Round(time.Millisecond))
}

// containerID returns the id of service's container, by the labels Compose
// gives it (the docker CLI answers faster than Compose v1).
func (s *stack) containerID(service string) (string, error) {
	out, err := s.docker("ps", "--all", "--quiet", "--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service)
	if err != nil {
		return "", err
	}
	ids := strings.Fields(out)
	if len(ids) != 1 {
		return "", fmt.Errorf("%d containers of %s: %v", len(ids), service, ids)
	}
	return ids[0], nil
}

// url returns where the host reaches service's API,
// https://127.0.0.1:<port>. The port is read again after forget (it changes
// when the container restarts).
func (s *stack) url(service string) (string, error) {
	s.mu.Lock()
	u, ok := s.urls[service]
	s.mu.Unlock()
	if ok {
		return u, nil
	}
	id, err := s.containerID(service)
	if err != nil {
		return "", err
	}
	out, err := s.docker("port", id, "8080/tcp")
	if err != nil {
		return "", err
	}
	if addrs := strings.Fields(out); len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		return "", fmt.Errorf("%s's API is published on %q, want one port on 127.0.0.1 only", service, out)
	}
	u = "https://" + out
	s.mu.Lock()
	s.urls[service] = u
	s.mu.Unlock()
	return u, nil
}

// forget drops what url knows of service's port.
func (s *stack) forget(service string) {
	s.mu.Lock()
	delete(s.urls, service)
	s.mu.Unlock()
}

// startedAt returns when service's container (last) started.
func (s *stack) startedAt(service string) string {
	s.t.Helper()
	id, err := s.containerID(service)
	if err == nil {
		var out string
		if out, err = s.docker("inspect", "--format", "{{.State.StartedAt}}", id); err == nil {
			return out
		}
	}
	s.t.Fatal(err)
	return ""
}

// health returns the Docker health status of service's container.
func (s *stack) health(service string) (string, error) {
	id, err := s.containerID(service)
	if err != nil {
		return "", err
	}
	return s.docker("inspect", "--format", "{{if .State.Health}}{{.State.Health.Status}}{{else}}no healthcheck{{end}}", id)
}

// waitFormed waits until every service in want is healthy (its own
// healthcheck) and lists exactly want as voters, all gossip-alive, under
// one leader, as the host sees through each one's published port.
func (s *stack) waitFormed(want []string) {
	s.t.Helper()
	testutil.WaitFor(s.t, settle, fmt.Sprintf("%v healthy and formed", want), func() error {
		leaders := map[string]bool{}
		for _, n := range want {
			st, _, err := s.readyStatus(n)
			if err != nil {
				return err
			}
			if got := st.Voters(); !slices.Equal(got, want) {
				return fmt.Errorf("%s lists voters %v, want %v", n, got, want)
			}
			for _, m := range st.Nodes {
				if m.Gossip != "alive" {
					return fmt.Errorf("%s sees %s %s", n, m.ID, m.Gossip)
				}
			}
			leaders[st.LeaderID()] = true
		}
		if len(leaders) != 1 || leaders[""] {
			return fmt.Errorf("leaders seen: %v", leaders)
		}
		return nil
	})
}

// readyStatus returns service's GET /v1/cluster (decoded, and its body)
// once the container is healthy by its own healthcheck and /readyz
// answers 200.
func (s *stack) readyStatus(service string) (testutil.ClusterStatus, []byte, error) {
	var st testutil.ClusterStatus
	h, err := s.health(service)
	if err != nil {
		return st, nil, err
	}
	if h != "healthy" {
		return st, nil, fmt.Errorf("%s is %s", service, h)
	}
	code, body, err := s.do(http.MethodGet, service, "/readyz", "", nil)
	if err != nil || code != http.StatusOK {
		return st, nil, fmt.Errorf("%s /readyz: %d %s %v", service, code, body, err)
	}
	code, body, err = s.do(http.MethodGet, service, "/v1/cluster", s.adminToken, nil)
	if err != nil || code != http.StatusOK {
		return st, nil, fmt.Errorf("%s /v1/cluster: %d %s %v", service, code, body, err)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, nil, fmt.Errorf("%s /v1/cluster: %w: %s", service, err, body)
	}
	return st, body, nil
}

// do sends a request to service's API over HTTPS and returns the status
// and body; token, when set, is sent as the bearer token.
func (s *stack) do(method, service, path, token string, body any) (int, []byte, error) {
	base, err := s.url(service)
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.forget(service) // it may have come back on another port
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// checkRefusals checks that service's API is HTTPS only and wants a
// token.
func (s *stack) checkRefusals(service string) {
	s.t.Helper()
	base, err := s.url(service)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + strings.TrimPrefix(base, "https://") + "/readyz")
	if err != nil {
		s.t.Fatalf("plain HTTP to %s: %v", service, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		s.t.Errorf("plain HTTP to %s answered %s, want 400 (the API is HTTPS only)", service, resp.Status)
	}
	code, body, err := s.do(http.MethodPost, service, "/v1/tools/call", "", map[string]any{"tool": "echo", "request_id": "no-token"})
	if err != nil || code != http.StatusUnauthorized {
		s.t.Errorf("a call without a token answered %d %s %v, want 401", code, body, err)
	}
}

// checkCABundle checks that service's container holds a CA bundle where
// Go looks first.
func (s *stack) checkCABundle(service string) {
	s.t.Helper()
	id, err := s.containerID(service)
	if err != nil {
		s.t.Fatal(err)
	}
	dst := filepath.Join(s.t.TempDir(), "ca-certificates.crt")
	if _, err := s.docker("cp", id+":/etc/ssl/certs/ca-certificates.crt", dst); err != nil {
		s.t.Fatalf("the image has no CA bundle: %v", err)
	}
	pem, err := os.ReadFile(dst)
	if err != nil {
		s.t.Fatal(err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		s.t.Errorf("the image's /etc/ssl/certs/ca-certificates.crt holds no certificate")
	}
}

type callResult struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Replayed    bool            `json:"replayed"`
	Data        json.RawMessage `json:"data"`
}

// mustCall calls the echo tool with requestID through service (as the
// agent) and checks the answer: completed, replayed as replay says, and
// when replayed, execution wantExec. A node that answers 503 UNAVAILABLE
// (no leader yet) or not at all is asked again.
func (s *stack) mustCall(service, requestID string, replay bool, wantExec string) callResult {
	s.t.Helper()
	var (
		res   callResult
		fatal error
	)
	args := map[string]any{"request": requestID}
	testutil.WaitFor(s.t, settle, service+" to answer call "+requestID, func() error {
		code, body, err := s.do(http.MethodPost, service, "/v1/tools/call", s.agentToken,
			map[string]any{"tool": "echo", "arguments": args, "request_id": requestID})
		switch {
		case err != nil:
			return err
		case code == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"UNAVAILABLE"`)):
			return fmt.Errorf("%d %s", code, body)
		case code != http.StatusOK:
			fatal = fmt.Errorf("%s: call %s: %d %s", service, requestID, code, body)
			return nil
		}
		if err := json.Unmarshal(body, &res); err != nil {
			fatal = fmt.Errorf("%s: call %s: %w: %s", service, requestID, err, body)
		}
		return nil
	})
	switch {
	case fatal != nil:
		s.t.Fatal(fatal)
	case res.Status != "completed":
		s.t.Fatalf("%s: call %s: status %s, want completed", service, requestID, res.Status)
	case res.Replayed != replay:
		s.t.Fatalf("%s: call %s: replayed %v, want %v", service, requestID, res.Replayed, replay)
	case replay && res.ExecutionID != wantExec:
		s.t.Fatalf("%s: call %s replayed execution %s, want %s", service, requestID, res.ExecutionID, wantExec)
	case res.ExecutionID == "":
		s.t.Fatalf("%s: call %s: no execution_id", service, requestID)
	}
	var echoed map[string]any
	if err := json.Unmarshal(res.Data, &echoed); err != nil || echoed["request"] != requestID {
		s.t.Fatalf("%s: call %s: data %s, want the arguments echoed", service, requestID, res.Data)
	}
	return res
}
