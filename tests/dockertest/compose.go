package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// EnvRequireDocker makes NeedEngine and NeedCompose fail, rather than
// skip, when Docker (or Compose) is missing; CI sets it, and a set $CI
// counts the same.
const EnvRequireDocker = "CARMY_REQUIRE_DOCKER"

// required reports whether a missing Docker engine is a failure.
func required() bool { return os.Getenv(EnvRequireDocker) == "1" || os.Getenv("CI") != "" }

// NeedEngine is the gate of the Docker tests that run by default (in
// `go test ./...`, unlike those behind Require): it returns when a Docker
// engine answers; otherwise it skips tb, loudly, or fails it when
// CARMY_REQUIRE_DOCKER=1 or $CI is set. what names the test in the
// messages.
func NeedEngine(tb testing.TB, what string) {
	tb.Helper()
	if err := Available(); err != nil {
		missing(tb, what, err)
	}
}

// NeedCompose is NeedEngine for tests that also need Docker Compose; it
// returns the command that runs it (ComposeCommand).
func NeedCompose(tb testing.TB, what string) []string {
	tb.Helper()
	NeedEngine(tb, what)
	cmd, err := ComposeCommand()
	if err != nil {
		missing(tb, what, err)
	}
	return cmd
}

func missing(tb testing.TB, what string, err error) {
	tb.Helper()
	if required() {
		tb.Fatalf("%s CANNOT RUN, and this is CI (%s=1 or CI is set): %v", what, EnvRequireDocker, err)
	}
	testutil.SkipLoudly(tb, "!!! %s SKIPPED: %v; it needs Docker (and Compose), and %s=1 makes this a failure", what, err, EnvRequireDocker)
}

var compose struct {
	once sync.Once
	cmd  []string
	err  error
}

// ComposeCommand returns how to run Docker Compose here: ["docker",
// "compose"] (the v2 plugin) when `docker compose version` answers, else
// ["docker-compose"] (v1.29 or a standalone v2) when that answers, else an
// error saying neither does. It looks once per process.
func ComposeCommand() ([]string, error) {
	compose.once.Do(func() {
		try := func(argv ...string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "version")...)
			cmd.WaitDelay = 5 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v version: %w: %s", argv, err, out)
			}
			return nil
		}
		errV2 := try("docker", "compose")
		if errV2 == nil {
			compose.cmd = []string{"docker", "compose"}
			return
		}
		errV1 := try("docker-compose")
		if errV1 == nil {
			compose.cmd = []string{"docker-compose"}
			return
		}
		compose.err = fmt.Errorf("dockertest: no Docker Compose: %v; %v", errV2, errV1)
	})
	return compose.cmd, compose.err
}
