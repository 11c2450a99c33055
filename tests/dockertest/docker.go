package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// Environment variables the package reads.
const (
	// EnvEnable turns the Docker tests on when it is "1".
	EnvEnable = "CARMY_DOCKER_TESTS"
	// EnvImage names the image tag to build and run (default DefaultImage).
	EnvImage = "CARMY_IMAGE"
	// EnvTestImage names the robustness test image's tag (default
	// DefaultTestImage).
	EnvTestImage = "CARMY_TEST_IMAGE"
	// EnvPostgresImage names the PostgreSQL test image's tag (default
	// DefaultPostgresImage).
	EnvPostgresImage = "CARMY_POSTGRES_TEST_IMAGE"
)

// DefaultImage is the tag BuildImage gives the image when $CARMY_IMAGE is
// empty (the same default as scripts/image).
const DefaultImage = "carmy:dev"

// DefaultTestImage is the tag BuildTestImage gives the test image when
// $CARMY_TEST_IMAGE is empty (the same default as scripts/image --test).
const DefaultTestImage = "carmy-test:dev"

// DefaultPostgresImage is the tag BuildPostgresImage gives the PostgreSQL
// test image when $CARMY_POSTGRES_TEST_IMAGE is empty (the same default as
// scripts/image --postgres).
const DefaultPostgresImage = "carmy-postgres-test:dev"

// Labels every object the package creates carries.
const (
	// LabelRun's value is the run id of the Network the object belongs to.
	LabelRun = "carmy.test.run"
	// LabelOwner's value is always "dockertest": it finds what any run
	// left behind.
	LabelOwner = "carmy.test"
)

const ownerValue = "dockertest"

// cmdTimeout bounds one docker command (build aside).
const cmdTimeout = 2 * time.Minute

// Enabled reports whether $CARMY_DOCKER_TESTS is "1".
func Enabled() bool { return os.Getenv(EnvEnable) == "1" }

// Require skips tb unless the Docker tests are enabled, saying how to
// enable them, and fails it when they are enabled but Docker does not
// answer (Available).
func Require(tb testing.TB) {
	tb.Helper()
	if !Enabled() {
		testutil.SkipLoudly(tb, "Docker tests are off: set %s=1 to run them (they need a Docker daemon; they build the image %s)", EnvEnable, ImageTag())
	}
	if err := Available(); err != nil {
		tb.Fatalf("%s=1 but Docker is not available: %v", EnvEnable, err)
	}
}

// Available reports whether the docker CLI is on PATH and the daemon
// answers `docker version`; the error says which is missing.
func Available() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("dockertest: the docker CLI is not on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := dockerCtx(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return fmt.Errorf("dockertest: the Docker daemon does not answer: %w", err)
	}
	return nil
}

// ImageTag returns the tag BuildImage builds: $CARMY_IMAGE, or
// DefaultImage.
func ImageTag() string {
	if tag := os.Getenv(EnvImage); tag != "" {
		return tag
	}
	return DefaultImage
}

// builds holds one build per image tag and test process.
var builds struct {
	mu   sync.Mutex
	tags map[string]*imageBuild
}

type imageBuild struct {
	once sync.Once
	id   string
	err  error
}

// BuildImage builds the carmy image by running scripts/image (a static
// binary in an image FROM scratch) with $CARMY_IMAGE set to ImageTag, once
// per test process, and returns the tag. Later calls return at once (and
// fail tb again if the build failed). The image is kept for the next run:
// an unchanged binary rebuilds from the cache in seconds.
func BuildImage(tb testing.TB) string {
	tb.Helper()
	return buildImage(tb, ImageTag(), EnvImage)
}

// TestImageTag returns the tag BuildTestImage builds: $CARMY_TEST_IMAGE,
// or DefaultTestImage.
func TestImageTag() string {
	if tag := os.Getenv(EnvTestImage); tag != "" {
		return tag
	}
	return DefaultTestImage
}

// BuildTestImage builds the robustness test image (`scripts/image --test`:
// carmy with the test fault layer compiled in, the ledger server and its
// tool's config) like BuildImage, and returns its tag.
func BuildTestImage(tb testing.TB) string {
	tb.Helper()
	return buildImage(tb, TestImageTag(), EnvTestImage, "--test")
}

// BuildPostgresImage builds the PostgreSQL test image (`scripts/image
// --postgres`: the machine's own PostgreSQL server on an empty base) like
// BuildImage, and returns its tag. It needs the server installed
// (Debian's postgresql package).
func BuildPostgresImage(tb testing.TB) string {
	tb.Helper()
	tag := DefaultPostgresImage
	if t := os.Getenv(EnvPostgresImage); t != "" {
		tag = t
	}
	return buildImage(tb, tag, EnvPostgresImage, "--postgres")
}

func buildImage(tb testing.TB, tag, env string, args ...string) string {
	tb.Helper()
	root := testutil.ModuleRoot(tb)
	builds.mu.Lock()
	if builds.tags == nil {
		builds.tags = map[string]*imageBuild{}
	}
	b := builds.tags[tag]
	if b == nil {
		b = &imageBuild{}
		builds.tags[tag] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		script := filepath.Join(root, "scripts", "image")
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env+"="+tag)
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.err = fmt.Errorf("dockertest: building the image %s with %s %s: %w\n%s%s", tag, script, strings.Join(args, " "), err, stderr.Bytes(), stdout.Bytes())
			return
		}
		b.id = strings.TrimSpace(stdout.String())
		tb.Logf("built image %s (%s) in %s", tag, b.id, time.Since(start).Round(time.Millisecond))
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return tag
}

// docker runs the docker CLI with args, bounded by cmdTimeout, and returns
// its standard output without surrounding white space.
func docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return dockerCtx(ctx, args...)
}

// dockerCtx is docker bounded by ctx. Its error names the command and
// carries what it printed.
func dockerCtx(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(stdout.String()), nil
}
