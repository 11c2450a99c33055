package dockertest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Ports a node listens on inside its container.
const (
	HTTPPort   = 8080
	RaftPort   = 8300
	GossipPort = 8301
)

// Network is a user-defined bridge network for one test's containers, and
// the owner of everything created for them. Its methods are safe for
// concurrent use.
type Network struct {
	tb     testing.TB
	runID  string
	image  string
	key    string
	subnet string
	env    []string
	mounts []string
	// dataTmpfs is Options.DataTmpfsBytes; tmpfsFailed says why it could
	// not be had (then nodes get volumes).
	dataTmpfs   int64
	tmpfsFailed error

	mu         sync.Mutex
	containers []*Container
	tmpfsDirs  []string
}

// NewNetwork builds the image (BuildImage) and creates a bridge network
// named after a fresh run id, "carmy-<label>-<random>" (the prefix is
// $CARMY_NAME_PREFIX), labelled carmy.test.run=<run id>, carmy.test=dockertest
// and carmy.test.process=<host>/<pid>. The first network of a process
// sweeps what earlier, dead test processes left (Prepare). Its subnet is one Docker chose, pinned so that
// Container.Connect can give a container back the address its process is
// bound to. When tb's test ends, whether or not it failed, every container,
// volume and network carrying the run id is removed; if the test failed,
// each container's output is logged first. It fails tb when Docker is not
// available.
func NewNetwork(tb testing.TB, label string) *Network {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Fatal(err)
	}
	return NewNetworkWith(tb, label, Options{Image: BuildImage(tb)})
}

// Options configure NewNetworkWith.
type Options struct {
	// Image is the image nodes run (built already).
	Image string
	// Env is set in every node's environment, NAME=value each.
	Env []string
	// Mounts are bind mounts of every node, "host-path:container-path[:ro]"
	// each (files the image's user can read).
	Mounts []string
	// DataTmpfsBytes, when positive, puts each node's /data on a tmpfs of
	// that size mounted on the host (Container.DataDir, FillData), where
	// the host allows it (root); else, and by default, on a volume.
	DataTmpfsBytes int64
}

// NewNetworkWith is NewNetwork for nodes running opts.Image, which the
// caller built (BuildImage, BuildTestImage), with opts.Env.
func NewNetworkWith(tb testing.TB, label string, opts Options) *Network {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Fatal(err)
	}
	Prepare(tb)
	n := &Network{tb: tb, image: opts.Image, env: slices.Clone(opts.Env), mounts: slices.Clone(opts.Mounts), runID: newRunID(label), key: randomHex(16),
		dataTmpfs: opts.DataTmpfsBytes}
	tb.Cleanup(n.cleanup) // before creating anything, so a half-made network goes too
	registerNetwork(n)
	if err := n.create(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// RunID returns the run id: the network's name, the prefix of its
// containers' and volumes' names, and the value of their LabelRun.
func (n *Network) RunID() string { return n.runID }

// Name returns the Docker network's name (the run id).
func (n *Network) Name() string { return n.runID }

// Subnet returns the network's IPv4 subnet in CIDR notation.
func (n *Network) Subnet() string { return n.subnet }

// Image returns the image the containers run.
func (n *Network) Image() string { return n.image }

// ClusterKey returns the --cluster-key every node of the network gets.
func (n *Network) ClusterKey() string { return n.key }

// Filter returns the `docker … ls --filter` argument that selects what
// belongs to this network's run: "label=carmy.test.run=<run id>".
func (n *Network) Filter() string { return "label=" + LabelRun + "=" + n.runID }

// Containers returns the containers started on the network, in order.
func (n *Network) Containers() []*Container {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Container(nil), n.containers...)
}

// Container returns the container of node name, or nil.
func (n *Network) Container(name string) *Container {
	for _, c := range n.Containers() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (n *Network) labels() []string {
	return []string{"--label", LabelRun + "=" + n.runID, "--label", LabelOwner + "=" + ownerValue,
		"--label", LabelOwnerProcess + "=" + owner}
}

// create makes the network. Docker assigns an --ip on connect only on a
// network whose subnet the user configured, so the network is created
// once to let Docker pick a free subnet (it avoids its other networks and
// the host's routes), then again with that subnet given.
func (n *Network) create() error {
	var err error
	for range 3 {
		if err = n.createOnce(); err == nil {
			return nil
		}
	}
	return err
}

func (n *Network) createOnce() error {
	create := append([]string{"network", "create", "--driver", "bridge"}, n.labels()...)
	if _, err := docker(append(create, n.runID)...); err != nil {
		return err
	}
	subnet, err := docker("network", "inspect", "--format", `{{range .IPAM.Config}}{{.Subnet}} {{end}}`, n.runID)
	if err != nil {
		return err
	}
	if _, err := docker("network", "rm", n.runID); err != nil {
		return err
	}
	subnet, _, _ = strings.Cut(subnet, " ")
	if subnet == "" {
		return fmt.Errorf("dockertest: network %s: Docker assigned no subnet", n.runID)
	}
	if _, err := docker(append(create, "--subnet", subnet, n.runID)...); err != nil {
		return err // another network took the subnet meanwhile: try again
	}
	n.subnet = subnet
	return nil
}

// cleanup removes everything labelled with the run id, logging the
// containers' output first when the test failed.
func (n *Network) cleanup() {
	if n.tb.Failed() {
		for _, c := range n.Containers() {
			n.tb.Logf("container %s (node %s, %s) output:\n%s", c.id, c.name, c.describe(), c.Logs())
		}
	}
	if err := removeRun(n.runID); err != nil {
		n.tb.Errorf("dockertest: cleaning up run %s: %v", n.runID, err)
	}
	if err := n.unmountTmpfsData(); err != nil {
		n.tb.Errorf("dockertest: cleaning up run %s: %v", n.runID, err)
	}
}

// TmpfsUnavailable says why the nodes' data dirs are volumes although
// Options.DataTmpfsBytes asked for tmpfs, or nil.
func (n *Network) TmpfsUnavailable() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tmpfsFailed
}

// removeRun removes the containers (with their anonymous volumes),
// networks and volumes labelled with runID.
func removeRun(runID string) error {
	filter := "label=" + LabelRun + "=" + runID
	var errs []error
	for _, step := range []struct{ list, remove []string }{
		{[]string{"ps", "--all", "--quiet", "--filter", filter}, []string{"rm", "--force", "--volumes"}},
		{[]string{"network", "ls", "--quiet", "--filter", filter}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "--quiet", "--filter", filter}, []string{"volume", "rm", "--force"}},
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

// Leftovers lists what Docker still holds with LabelRun runID: containers,
// networks and volumes, as "container <id>", "network <id>" and
// "volume <name>". It is empty once a network's test has ended.
func Leftovers(runID string) ([]string, error) {
	filter := "label=" + LabelRun + "=" + runID
	var left []string
	for _, kind := range []struct {
		name string
		list []string
	}{
		{"container", []string{"ps", "--all", "--quiet", "--filter", filter}},
		{"network", []string{"network", "ls", "--quiet", "--filter", filter}},
		{"volume", []string{"volume", "ls", "--quiet", "--filter", filter}},
	} {
		out, err := docker(kind.list...)
		if err != nil {
			return left, err
		}
		for _, id := range strings.Fields(out) {
			left = append(left, kind.name+" "+id)
		}
	}
	return left, nil
}

var notName = regexp.MustCompile(`[^a-z0-9]+`)

// newRunID returns "<prefix><label>-<8 hex digits>", the prefix
// NamePrefix (default "carmy-"), the label reduced to lower-case letters,
// digits and dashes.
func newRunID(label string) string {
	label = strings.Trim(notName.ReplaceAllString(strings.ToLower(label), "-"), "-")
	if len(label) > 24 {
		label = strings.TrimRight(label[:24], "-")
	}
	if label == "" {
		label = "test"
	}
	return NamePrefix() + label + "-" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
