package dockertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// LabelOwnerProcess's value is "<host name>/<pid>" of the test process that
// created the object: the sweep removes what a process left behind once
// that process is gone.
const LabelOwnerProcess = "carmy.test.process"

// EnvNamePrefix names the prefix of every Docker name the tests (and the
// documents' commands) give: networks, containers, volumes and Compose
// projects. Default DefaultNamePrefix.
const EnvNamePrefix = "CARMY_NAME_PREFIX"

// DefaultNamePrefix is the prefix of Docker names when $CARMY_NAME_PREFIX
// is empty.
const DefaultNamePrefix = "carmy-"

// unownedGrace is how old an object labelled LabelOwner=dockertest but
// without LabelOwnerProcess (made by an older build of these tests) must
// be for the sweep to remove it: longer than any run, so that a run of an
// older build going on beside this one keeps its containers.
const unownedGrace = 6 * time.Hour

// timeoutMargin is how long before the test binary's -timeout the
// objects this process made are removed: the timeout panics the binary,
// and no Cleanup runs after that.
const timeoutMargin = 15 * time.Second

// NamePrefix returns $CARMY_NAME_PREFIX, or DefaultNamePrefix.
func NamePrefix() string {
	if p := os.Getenv(EnvNamePrefix); p != "" {
		return p
	}
	return DefaultNamePrefix
}

// owner is this process's LabelOwnerProcess value.
var owner = func() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}()

// processStart is when this test process started, roughly: the sweep
// removes only what was made before it.
var processStart = time.Now()

// guard holds what this process must remove should it be interrupted or
// reach its -timeout: its own objects (by LabelOwnerProcess) and the
// Compose projects it registered.
var guard struct {
	once     sync.Once
	sweep    sync.Once
	mu       sync.Mutex
	projects []string
	networks []*Network
	timer    *time.Timer
}

// registerNetwork notes a network of this process, whose host tmpfs data
// dirs an interrupt or a timeout must unmount too.
func registerNetwork(n *Network) {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	guard.networks = append(guard.networks, n)
}

// Prepare is called before a test creates Docker objects. Once per
// process it sweeps what earlier test processes left behind
// (SweepLeftovers; each removal is printed where go test shows it,
// testutil.Loud), and it
// arranges that this process's objects are removed when the process gets
// SIGINT or SIGTERM (then it exits 130) and shortly before tb's -timeout
// fires. With t.Cleanup, which covers a test that ends (failed or not),
// nothing is left behind short of a SIGKILL, and the next run's sweep
// takes care of that.
func Prepare(tb testing.TB) {
	tb.Helper()
	guard.sweep.Do(func() {
		removed, err := SweepLeftovers()
		for _, r := range removed {
			fmt.Fprintf(testutil.Loud(), "dockertest: removed %s, left behind by an earlier test run\n", r)
		}
		if err != nil {
			fmt.Fprintf(testutil.Loud(), "dockertest: sweeping what earlier test runs left: %v\n", err)
		}
	})
	guard.once.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			s := <-sig
			fmt.Fprintf(os.Stderr, "dockertest: %v: removing this test process's containers, networks and volumes\n", s)
			if err := removeOwned(); err != nil {
				fmt.Fprintf(os.Stderr, "dockertest: %v\n", err)
			}
			os.Exit(130)
		}()
	})
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			guard.mu.Lock()
			if guard.timer == nil && time.Until(deadline) > 2*timeoutMargin {
				guard.timer = time.AfterFunc(time.Until(deadline)-timeoutMargin, func() {
					fmt.Fprintf(os.Stderr, "dockertest: the test binary's -timeout is %s away: removing this test process's containers, networks and volumes\n", timeoutMargin)
					if err := removeOwned(); err != nil {
						fmt.Fprintf(os.Stderr, "dockertest: %v\n", err)
					}
				})
			}
			guard.mu.Unlock()
		}
	}
}

// RegisterProject names a Compose project this process brings up, for
// removal on an interrupt or a timeout (see Prepare). Its name must be
// ProjectName's, so that a later run's sweep finds it too.
func RegisterProject(project string) {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	guard.projects = append(guard.projects, project)
}

// ProjectName returns a Compose project name for a test of this process:
// "<prefix><label>-<pid>-<random>", which SweepLeftovers recognises.
func ProjectName(label string) string {
	return NamePrefix() + label + "-p" + strconv.Itoa(os.Getpid()) + "-" + randomHex(4)
}

// removeOwned removes what this process made: every object with its
// LabelOwnerProcess, and the registered Compose projects' objects.
func removeOwned() error {
	filters := []string{"label=" + LabelOwnerProcess + "=" + owner}
	guard.mu.Lock()
	for _, p := range guard.projects {
		filters = append(filters, "label=com.docker.compose.project="+p)
	}
	networks := slices.Clone(guard.networks)
	guard.mu.Unlock()
	var errs []error
	for _, f := range filters {
		if err := removeFiltered(f); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range networks {
		if err := n.unmountTmpfsData(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeFiltered removes the containers (with their anonymous volumes),
// networks and volumes that docker's --filter f selects.
func removeFiltered(f string) error {
	var errs []error
	for _, step := range []struct{ list, remove []string }{
		{[]string{"ps", "--all", "--quiet", "--filter", f}, []string{"rm", "--force", "--volumes"}},
		{[]string{"network", "ls", "--quiet", "--filter", f}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "--quiet", "--filter", f}, []string{"volume", "rm", "--force"}},
	} {
		out, err := docker(step.list...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ids := strings.Fields(out); len(ids) > 0 {
			if _, err := docker(append(step.remove, ids...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// An object is one container, network or volume: its kind, id (or name),
// creation time and labels.
type object struct {
	kind, id string
	created  time.Time
	labels   map[string]string
}

// SweepLeftovers removes what test processes that are gone left behind,
// and returns what it removed ("container <id>", …):
//
//   - objects labelled carmy.test=dockertest whose carmy.test.process
//     names this host and a process that no longer runs, created before
//     this process started;
//   - such objects without carmy.test.process (older builds of these
//     tests) once they are unownedGrace old;
//   - objects of Compose projects named by ProjectName whose process no
//     longer runs, created before this process started;
//   - host tmpfs data dirs (Options.DataTmpfsBytes) made before this
//     process started, of runs that have no container left: unmounted
//     and removed ("tmpfs <path>").
//
// A run going on beside this one, in another process, keeps everything.
func SweepLeftovers() ([]string, error) {
	removed, err := sweepObjects(processStart)
	dirs, dirErr := sweepTmpfsDirs(processStart)
	return append(removed, dirs...), errors.Join(err, dirErr)
}

// sweepObjects removes the containers, networks and volumes of dead test
// processes made before before (see SweepLeftovers).
func sweepObjects(before time.Time) ([]string, error) {
	var errs []error
	var removed []string
	host, _ := os.Hostname()
	for _, kind := range []string{"container", "network", "volume"} {
		objs, err := listObjects(kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var ids []string
		for _, o := range objs {
			if leftover(o, host, before) {
				ids = append(ids, o.id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		rm := map[string][]string{"container": {"rm", "--force", "--volumes"}, "network": {"network", "rm"}, "volume": {"volume", "rm", "--force"}}[kind]
		if _, err := docker(append(rm, ids...)...); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			removed = append(removed, kind+" "+id)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepTmpfsDirs unmounts and removes the tmpfs data dirs
// ("<run id>-<node>-data-<random>" in the temporary directory) made before
// before whose run holds no container any more.
func sweepTmpfsDirs(before time.Time) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), NamePrefix()+"*-data-*"))
	if err != nil {
		return nil, err
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	var removed []string
	var errs []error
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || !fi.ModTime().Before(before) {
			continue
		}
		run, ok := tmpfsRun(filepath.Base(dir))
		if !ok {
			continue
		}
		left, err := docker("ps", "--all", "--quiet", "--filter", "label="+LabelRun+"="+run)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if left != "" {
			continue // its run still has containers: maybe it goes on
		}
		if strings.Contains(string(mounts), " "+dir+" ") {
			if out, err := exec.Command("umount", "--lazy", dir).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("umount %s: %v: %s", dir, err, out))
				continue
			}
		}
		if err := os.Remove(dir); err != nil { // only if empty: nothing else is lost
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "tmpfs "+dir)
	}
	return removed, errors.Join(errs...)
}

// tmpfsRun returns the run id in the name of a tmpfs data dir,
// "<run id>-<node>-data-<random>".
func tmpfsRun(name string) (string, bool) {
	i := strings.LastIndex(name, "-data-")
	if i < 0 {
		return "", false
	}
	j := strings.LastIndex(name[:i], "-")
	if j <= 0 {
		return "", false
	}
	return name[:j], true
}

// leftover decides whether o belongs to a test process that is gone and
// was made before before.
func leftover(o object, host string, before time.Time) bool {
	if !o.created.IsZero() && !o.created.Before(before) {
		return false
	}
	if o.labels[LabelOwner] == ownerValue {
		proc, ok := o.labels[LabelOwnerProcess]
		if !ok {
			return !o.created.IsZero() && time.Since(o.created) > unownedGrace
		}
		h, pid, ok := strings.Cut(proc, "/")
		return ok && h == host && !processRuns(pid)
	}
	if project := o.labels["com.docker.compose.project"]; project != "" {
		pid, ok := projectPID(project)
		return ok && !processRuns(pid)
	}
	return false
}

// projectPID returns the pid in a project name made by ProjectName.
func projectPID(project string) (string, bool) {
	rest, ok := strings.CutPrefix(project, NamePrefix())
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 3 {
		return "", false
	}
	p := parts[len(parts)-2]
	if len(p) < 2 || p[0] != 'p' {
		return "", false
	}
	if _, err := strconv.Atoi(p[1:]); err != nil {
		return "", false
	}
	return p[1:], true
}

// processRuns reports whether process pid exists on this host.
func processRuns(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	err = syscall.Kill(n, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// listObjects lists the objects of kind that carry LabelOwner or a
// Compose project label, with their creation times and labels.
func listObjects(kind string) ([]object, error) {
	var ids []string
	for _, f := range []string{"label=" + LabelOwner, "label=com.docker.compose.project"} {
		var list []string
		switch kind {
		case "container":
			list = []string{"ps", "--all", "--quiet", "--no-trunc", "--filter", f}
		default:
			list = []string{kind, "ls", "--quiet", "--filter", f}
		}
		out, err := docker(list...)
		if err != nil {
			return nil, err
		}
		for _, id := range strings.Fields(out) {
			if !containsString(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	format := `{{.Id}}|{{.Created}}|{{range $k, $v := .Config.Labels}}{{$k}}={{$v}};{{end}}`
	inspect := []string{"container", "inspect"}
	switch kind {
	case "network":
		format = `{{.Id}}|{{.Created}}|{{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}}`
		inspect = []string{"network", "inspect"}
	case "volume":
		format = `{{.Name}}|{{.CreatedAt}}|{{range $k, $v := .Labels}}{{$k}}={{$v}};{{end}}`
		inspect = []string{"volume", "inspect"}
	}
	out, err := docker(append(append(inspect, "--format", format), ids...)...)
	if err != nil {
		// One may have gone meanwhile (another run removed it): inspect
		// them one by one, skipping those that are gone.
		var lines []string
		for _, id := range ids {
			if line, err := docker(append(append(inspect, "--format", format), id)...); err == nil {
				lines = append(lines, line)
			}
		}
		out = strings.Join(lines, "\n")
	}
	var objs []object
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			continue
		}
		o := object{kind: kind, id: f[0], labels: map[string]string{}}
		o.created, _ = parseCreated(f[1])
		for _, kv := range strings.Split(f[2], ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				o.labels[k] = v
			}
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// parseCreated reads the creation times docker inspect prints: RFC 3339
// with nanoseconds (containers, networks) or with a zone offset (volumes).
func parseCreated(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999 -0700 MST"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("dockertest: creation time %q", s)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
