package dockertest

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ServeTimeout bounds how long Start, Launch and Container.Start wait for
// a node to serve its API.
const ServeTimeout = 60 * time.Second

// Container is one carmy node in a container of a Network. Its methods are
// safe for concurrent use; the fault methods return errors rather than
// failing the test, so a harness may call them from any goroutine.
type Container struct {
	net  *Network
	name string // node id, host name and network alias
	id   string // container name: <run id>-<name>
	args []string
	port int // the container port published on the host
	// dataDir is the host path of its tmpfs /data, or "" for a volume.
	dataDir string
	// image is what it runs when not the network's (StartService), and
	// ready how to tell it serves (nil: GET /healthz answers 200).
	image string
	ready func(hostAddr string) error

	mu       sync.Mutex
	hostAddr string // 127.0.0.1:<port> the HTTP port is published at; "" while unknown
	ip       string // the address it had on the network when Disconnect cut it off
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Start runs node name on the network like Launch and fails tb if it does
// not serve its API within ServeTimeout.
func (n *Network) Start(tb testing.TB, name string, args ...string) *Container {
	tb.Helper()
	c, err := n.Launch(name, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Launch runs node name (a host name: lower-case letters, digits and
// dashes) in a new container <run id>-<name>, with host name and network
// alias name, a new volume <run id>-<name> on /data, the HTTP port
// published on 127.0.0.1 at a port Docker picks, and
//
//	serve --node-id <name> --data-dir /data --http-addr <name>:8080
//	  --raft-addr <name>:8300 --gossip-addr <name>:8301 --cluster-key <key> args…
//
// It waits until the node answers GET /healthz. On an error the container
// is kept (for its Logs) until the test ends; the error carries its
// output when it exited or did not serve in time.
func (n *Network) Launch(name string, args ...string) (*Container, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("dockertest: node name %q: want lower-case letters, digits and dashes", name)
	}
	if n.Container(name) != nil {
		return nil, fmt.Errorf("dockertest: node %s already runs on network %s", name, n.runID)
	}
	c := &Container{net: n, name: name, id: n.runID + "-" + name, args: append([]string(nil), args...), port: HTTPPort}
	var opts []string
	if n.dataTmpfs > 0 && n.TmpfsUnavailable() == nil {
		dir, err := n.mountTmpfsData(c, n.dataTmpfs)
		if err != nil {
			n.mu.Lock()
			n.tmpfsFailed = err
			n.mu.Unlock()
		} else {
			c.dataDir = dir
			opts = []string{"--volume", dir + ":/data"}
		}
	}
	if c.dataDir == "" {
		if _, err := docker(append(append([]string{"volume", "create"}, n.labels()...), c.id)...); err != nil {
			return nil, err
		}
		opts = []string{"--volume", c.id + ":/data"}
	}
	for _, e := range n.env {
		opts = append(opts, "--env", e)
	}
	for _, m := range n.mounts {
		opts = append(opts, "--volume", m)
	}
	cmd := append([]string{"serve", "--node-id", name, "--data-dir", "/data",
		"--http-addr", hostPort(name, HTTPPort), "--raft-addr", hostPort(name, RaftPort),
		"--gossip-addr", hostPort(name, GossipPort), "--cluster-key", n.key}, args...)
	return c, n.run(c, opts, cmd)
}

// run starts container c (`docker run` with its name, host name, alias,
// published port and the run's labels, then opts, the image and cmd),
// tracks it and waits until it serves GET /healthz.
func (n *Network) run(c *Container, opts, cmd []string) error {
	run := []string{"run", "--detach", "--name", c.id, "--hostname", c.name,
		"--network", n.runID, "--network-alias", c.name, "--publish", "127.0.0.1::" + strconv.Itoa(c.port)}
	run = append(run, n.labels()...)
	run = append(run, opts...)
	image := n.image
	if c.image != "" {
		image = c.image
	}
	run = append(run, image)
	_, err := docker(append(run, cmd...)...)
	// Track it even when `docker run` failed: a created container is
	// still there, and its logs say why.
	n.mu.Lock()
	n.containers = append(n.containers, c)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	return c.awaitServing(ServeTimeout)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// Name returns the node's name: its --node-id, host name and network
// alias.
func (c *Container) Name() string { return c.name }

// ContainerName returns the Docker container's name, <run id>-<name>.
func (c *Container) ContainerName() string { return c.id }

// Args returns the arguments the node was started with after the ones
// Launch supplies.
func (c *Container) Args() []string { return append([]string(nil), c.args...) }

// URL returns "http://127.0.0.1:<port>", where the host reaches the
// node's API, or "" when the HTTP port is not published (after Kill, Stop
// or Disconnect, until Start or Connect). The port may differ after each.
func (c *Container) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hostAddr == "" {
		return ""
	}
	return "http://" + c.hostAddr
}

// HTTPAddr returns the address other nodes reach the node's API at,
// "<name>:8080" (what --join takes).
func (c *Container) HTTPAddr() string { return hostPort(c.name, HTTPPort) }

// IP returns the container's IPv4 address on the network, or "" while it
// is stopped or disconnected.
func (c *Container) IP() string {
	ip, err := docker("inspect", "--format", c.networkField("IPAddress"), c.id)
	if err != nil {
		return ""
	}
	return ip
}

// networkField is an inspect template printing field of the container's
// endpoint on the test network (nothing when it is not attached).
func (c *Container) networkField(field string) string {
	return fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}{{.%s}}{{end}}`, c.net.runID, field)
}

// Running reports whether the container runs (paused counts as running).
func (c *Container) Running() bool {
	out, err := docker("inspect", "--format", "{{.State.Running}}", c.id)
	return err == nil && out == "true"
}

// Kill sends SIGKILL (`docker kill`): the node dies at once, its data dir
// stays.
func (c *Container) Kill() error {
	if _, err := docker("kill", c.id); err != nil {
		return err
	}
	c.setHostAddr("")
	return nil
}

// Stop sends SIGTERM and waits up to timeout (rounded up to whole
// seconds) for the node to exit, then SIGKILL (`docker stop`). It returns
// an error when the node did not exit 0 (a node must exit 0 within 15 s
// of SIGTERM).
func (c *Container) Stop(timeout time.Duration) error {
	secs := int(math.Ceil(timeout.Seconds()))
	if _, err := docker("stop", "--time", strconv.Itoa(secs), c.id); err != nil {
		return err
	}
	c.setHostAddr("")
	code, err := docker("inspect", "--format", "{{.State.ExitCode}}", c.id)
	if err != nil {
		return err
	}
	if code != "0" {
		return fmt.Errorf("dockertest: %s exited %s after SIGTERM (timeout %ds; 137 means it was killed)", c.id, code, secs)
	}
	return nil
}

// Start starts the container again after Kill or Stop (`docker start`):
// the same arguments and data dir, hence a restart of the same node. Its
// IP may change, and its published port does; Start reads the port again
// and waits until the node serves its API. When the IP the container asks
// for is taken, it is attached again with one Docker picks.
func (c *Container) Start() error {
	_, err := docker("start", c.id)
	if err != nil && strings.Contains(err.Error(), "Address already in use") {
		// The IP the container asks for (pinned by Connect, or its last
		// one) went to another container meanwhile: attach it afresh,
		// with an address Docker picks, and start it again.
		if _, err := docker("network", "disconnect", c.net.runID, c.id); err != nil {
			return err
		}
		if _, err := docker("network", "connect", "--alias", c.name, c.net.runID, c.id); err != nil {
			return err
		}
		c.mu.Lock()
		c.ip = ""
		c.mu.Unlock()
		_, err = docker("start", c.id)
	}
	if err != nil {
		return err
	}
	return c.awaitServing(ServeTimeout)
}

// Pause freezes every process of the container (`docker pause`, the
// cgroup freezer): the node neither answers nor times anything out.
func (c *Container) Pause() error {
	_, err := docker("pause", c.id)
	return err
}

// Unpause thaws a paused container.
func (c *Container) Unpause() error {
	_, err := docker("unpause", c.id)
	return err
}

// Disconnect cuts the container off the network (`docker network
// disconnect`): it keeps running but reaches no other node, and the host
// no longer reaches its API (URL is "" until Connect).
func (c *Container) Disconnect() error {
	ip := c.IP()
	if _, err := docker("network", "disconnect", c.net.runID, c.id); err != nil {
		return err
	}
	c.mu.Lock()
	c.ip, c.hostAddr = ip, ""
	c.mu.Unlock()
	return nil
}

// Connect attaches the container to the network again after Disconnect,
// with its alias and the IP address it had (its process is still bound to
// it), and reads its published port again.
func (c *Container) Connect() error {
	c.mu.Lock()
	ip := c.ip
	c.mu.Unlock()
	args := []string{"network", "connect", "--alias", c.name}
	if ip != "" {
		args = append(args, "--ip", ip)
	}
	if _, err := docker(append(args, c.net.runID, c.id)...); err != nil {
		return err
	}
	if !c.Running() {
		return nil
	}
	return c.readHostAddr()
}

// Logs returns what the node printed so far (stdout and stderr), or why
// they could not be read.
func (c *Container) Logs() string {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", c.id)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(docker logs %s: %v)", out, c.id, err)
	}
	return string(out)
}

// describe returns the container's state for failure messages.
func (c *Container) describe() string {
	out, err := docker("inspect", "--format",
		"{{.State.Status}} exit={{.State.ExitCode}} ip="+c.networkField("IPAddress"), c.id)
	if err != nil {
		return err.Error()
	}
	return out
}

func (c *Container) setHostAddr(addr string) {
	c.mu.Lock()
	c.hostAddr = addr
	c.mu.Unlock()
}

// readHostAddr reads where Docker published the HTTP port on 127.0.0.1.
func (c *Container) readHostAddr() error {
	c.setHostAddr("")
	out, err := docker("port", c.id, strconv.Itoa(c.port)+"/tcp")
	if err != nil {
		return err
	}
	for _, line := range strings.Fields(out) {
		if host, _, err := net.SplitHostPort(line); err == nil && host == "127.0.0.1" {
			c.setHostAddr(line)
			return nil
		}
	}
	return fmt.Errorf("dockertest: %s: no port published on 127.0.0.1 in %q", c.id, out)
}

var healthClient = &http.Client{Timeout: 2 * time.Second}

// awaitServing reads the published port, then polls the container's
// readiness (a node: GET /healthz answers 200; a service: its Ready)
// until it serves (awaitReady).
func (c *Container) awaitServing(timeout time.Duration) error {
	if err := c.readHostAddr(); err != nil {
		return fmt.Errorf("%w\n%s output:\n%s", err, c.id, c.Logs())
	}
	ready := c.ready
	if ready == nil {
		ready = c.healthz
	}
	return c.awaitReady(ready, timeout)
}

// healthz is a node's readiness: GET /healthz answers 200.
func (c *Container) healthz(string) error {
	url := c.URL() + "/healthz"
	resp, err := healthClient.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
