package dockertest

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(cmd.Process.Pid)
}

// TestLeftover pins what the sweep takes: objects of dead test processes
// of this host made before this process, old objects of older builds, and
// Compose projects of dead processes; never a live run's.
func TestLeftover(t *testing.T) {
	host, _ := os.Hostname()
	dead, live := deadPID(t), strconv.Itoa(os.Getpid())
	before, after := processStart.Add(-time.Minute), processStart.Add(time.Minute)
	owned := func(proc string, created time.Time) object {
		return object{created: created, labels: map[string]string{LabelOwner: ownerValue, LabelOwnerProcess: proc}}
	}
	project := func(name string, created time.Time) object {
		return object{created: created, labels: map[string]string{"com.docker.compose.project": name}}
	}
	for _, tt := range []struct {
		name string
		o    object
		want bool
	}{
		{"a dead process's", owned(host+"/"+dead, before), true},
		{"a live process's", owned(host+"/"+live, before), false},
		{"made after this process started", owned(host+"/"+dead, after), false},
		{"another host's", owned("elsewhere/"+dead, before), false},
		{"an older build's, old", object{created: time.Now().Add(-unownedGrace - time.Hour), labels: map[string]string{LabelOwner: ownerValue}}, true},
		{"an older build's, recent", object{created: before, labels: map[string]string{LabelOwner: ownerValue}}, false},
		{"a dead process's Compose project", project(NamePrefix()+"compose-test-p"+dead+"-0a1b2c3d", before), true},
		{"a live process's Compose project", project(NamePrefix()+"compose-test-p"+live+"-0a1b2c3d", before), false},
		{"a user's Compose project", project("carmy", before), false},
		{"another prefix's project", project("zz-compose-test-p"+dead+"-0a1b2c3d", before), false},
		{"unlabelled", object{created: before, labels: map[string]string{}}, false},
	} {
		if got := leftover(tt.o, host, processStart); got != tt.want {
			t.Errorf("%s: leftover = %v, want %v", tt.name, got, tt.want)
		}
	}
	if run, ok := tmpfsRun("carmy-robust3-e67d1fd8-n1-data-3643936868"); !ok || run != "carmy-robust3-e67d1fd8" {
		t.Errorf("tmpfsRun = %q, %v", run, ok)
	}
	if name := ProjectName("compose-test"); !strings.HasPrefix(name, NamePrefix()+"compose-test-p"+live+"-") {
		t.Errorf("ProjectName = %q", name)
	} else if pid, ok := projectPID(name); !ok || pid != live {
		t.Errorf("projectPID(%q) = %q, %v", name, pid, ok)
	}
}

// TestSweepLeftovers leaves a network, a volume and a container as a dead
// test process would, and checks that the sweep removes them and keeps
// this process's own. It runs where a Docker engine answers.
func TestSweepLeftovers(t *testing.T) {
	if err := Available(); err != nil {
		testutilSkip(t, err)
	}
	host, _ := os.Hostname()
	dead := deadPID(t)
	run := newRunID("sweep")
	labels := func(proc string) []string {
		return []string{"--label", LabelRun + "=" + run, "--label", LabelOwner + "=" + ownerValue, "--label", LabelOwnerProcess + "=" + proc}
	}
	t.Cleanup(func() { _ = removeRun(run) })
	if _, err := docker(append(append([]string{"network", "create"}, labels(host+"/"+dead)...), run+"-dead")...); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(append(append([]string{"volume", "create"}, labels(host+"/"+dead)...), run+"-dead")...); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(append(append([]string{"network", "create"}, labels(owner)...), run+"-mine")...); err != nil {
		t.Fatal(err)
	}
	removed, err := sweepObjects(time.Now().Add(time.Minute)) // as if this process had started after them
	if err != nil {
		t.Logf("the sweep: %v (other runs on this Docker host come and go; what matters is below)", err)
	}
	left, err := Leftovers(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || !strings.HasPrefix(left[0], "network ") {
		t.Fatalf("after the sweep (which removed %v), run %s holds %v; want this process's network alone", removed, run, left)
	}
	if !slices.Contains(removed, "volume "+run+"-dead") {
		t.Errorf("removed %v; want the dead process's volume %s-dead among them", removed, run)
	}
}

func testutilSkip(t *testing.T, err error) {
	t.Helper()
	testutil.SkipLoudly(t, "no Docker engine answers: %v", err)
}
