package docker_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestComposeOnPostgres runs compose.postgres.yaml as README.md here
// describes ("On PostgreSQL"), with the database image
// `scripts/image --postgres` builds from this machine's PostgreSQL in
// place of the PostgreSQL project's (no registry is reachable here):
//
//   - setup's secrets are enough: the database initialises with the
//     password file and the nodes, running as another user, read the same
//     file; the three nodes are healthy by their own healthchecks, and each
//     one's GET /v1/cluster names the store, the database (reachable) and
//     all three nodes alive;
//   - HTTPS only, tokens required, as the Raft cluster;
//   - every node takes a call, and the next one replays it;
//   - `stop db`: calls are refused 503 UNAVAILABLE, new ones and replays,
//     and nothing runs; `start db`: the nodes serve again by themselves,
//     every earlier call replays (the database's volume kept them) and a
//     call refused while it was down runs once;
//   - `down -v` (Cleanup) leaves nothing of the project.
func TestComposeOnPostgres(t *testing.T) {
	if os.Getenv(envCompose) == "off" {
		t.Skipf("%s=off", envCompose)
	}
	if testing.Short() {
		t.Skip("builds two images and runs a database and three nodes in containers")
	}
	testutil.LongTier(t, "the Compose fleet on PostgreSQL")
	composeCmd := dockertest.NeedCompose(t, "THE COMPOSE FLEET ON POSTGRESQL TEST (deploy/docker)")
	if _, err := exec.LookPath("initdb"); err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) == 0 {
			const msg = "no PostgreSQL server on this machine to build the database image from (Debian: apt-get install postgresql)"
			if os.Getenv("CI") != "" || os.Getenv("CARMY_REQUIRE_POSTGRES") == "1" {
				t.Fatal(msg)
			}
			testutil.SkipLoudly(t, "%s", msg)
		}
	}
	begin := time.Now()
	image := dockertest.BuildImage(t)
	dbImage := dockertest.BuildPostgresImage(t)
	bin := testutil.BuildCarmy(t)
	built := time.Since(begin)

	root := testutil.ModuleRoot(t)
	dir := filepath.Join(root, "deploy", "docker")
	secrets := filepath.Join(t.TempDir(), "secrets")
	setup := exec.Command(filepath.Join(dir, "setup"), "--dir", secrets, "n1", "n2", "n3")
	setup.Env = append(os.Environ(), "CARMY_BIN="+bin)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("deploy/docker/setup: %v\n%s", err, out)
	}
	s := newStack(t, composeCmd, dir, "compose.postgres.yaml", secrets, image, "CARMY_POSTGRES_IMAGE="+dbImage)
	t.Logf("compose %v, project %s, images %s and %s (built in %s)", composeCmd, s.project, image, dbImage, built.Round(time.Millisecond))

	step := time.Now()
	lap := func(what string) {
		t.Logf("%s: %s", what, time.Since(step).Round(time.Millisecond))
		step = time.Now()
	}
	s.must("up", "--detach")
	three := []string{"n1", "n2", "n3"}
	s.waitFleet(three)
	lap("up, healthy, every node alive")
	s.checkRefusals("n1")

	first := map[string]callResult{}
	for i, n := range three {
		id := "fleet-" + n
		first[n] = s.mustCall(n, id, false, "")
		s.mustCall(three[(i+1)%3], id, true, first[n].ExecutionID)
	}
	lap("calls and replays")

	s.must("stop", "db")
	for _, n := range three {
		s.mustRefuse(n, "fleet-"+n)            // a replay
		s.mustRefuse(n, "fleet-while-down-"+n) // a new call
	}
	lap("the database stopped: every node refuses")
	s.must("start", "db")
	for i, n := range three {
		s.mustCall(n, "fleet-"+three[(i+2)%3], true, first[three[(i+2)%3]].ExecutionID)
	}
	down := s.mustCall("n2", "fleet-while-down-n1", false, "")
	s.mustCall("n3", "fleet-while-down-n1", true, down.ExecutionID)
	lap("the database back: serving, nothing lost")
}

// waitFleet waits until every service in want is healthy (its own
// healthcheck), ready, and names in GET /v1/cluster the store postgres, a
// reachable database and exactly want, every one alive.
func (s *stack) waitFleet(want []string) {
	s.t.Helper()
	testutil.WaitFor(s.t, settle, fmt.Sprintf("%v healthy, each seeing the fleet", want), func() error {
		for _, n := range want {
			st, body, err := s.readyStatus(n)
			if err != nil {
				return err
			}
			if st.Store != "postgres" || st.Database == nil || !st.Database.Reachable {
				return fmt.Errorf("%s: store %q, database %+v; want postgres, reachable", n, st.Store, st.Database)
			}
			var alive []string
			for _, m := range st.Nodes {
				if m.Heartbeat == "alive" {
					alive = append(alive, m.ID)
				}
			}
			slices.Sort(alive)
			if !slices.Equal(alive, want) {
				return fmt.Errorf("%s sees %v alive, want %v: %s", n, alive, want, body)
			}
		}
		return nil
	})
}

// mustRefuse calls the echo tool with requestID through service until it
// answers 503 UNAVAILABLE (the node may take a moment to see the
// database gone); any answer of 200 fails the test, for the tool must not
// run, nor a replay be answered, without the database.
func (s *stack) mustRefuse(service, requestID string) {
	s.t.Helper()
	var ran error
	testutil.WaitFor(s.t, settle, service+" to refuse call "+requestID+" 503", func() error {
		code, body, err := s.do(http.MethodPost, service, "/v1/tools/call", s.agentToken,
			map[string]any{"tool": "echo", "arguments": map[string]any{"request": requestID}, "request_id": requestID})
		switch {
		case err != nil:
			return err
		case code == http.StatusOK:
			ran = fmt.Errorf("%s answered call %s 200 with the database stopped: %s", service, requestID, body)
			return nil
		case code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(`"UNAVAILABLE"`)):
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if ran != nil {
		s.t.Fatal(ran)
	}
}
