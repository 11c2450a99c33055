package dockertest

import (
	"fmt"
	"time"
)

// ServiceOptions describe a container of another image than the
// network's, such as a database its nodes use (StartService).
type ServiceOptions struct {
	// Image is the image to run (built or present already).
	Image string
	// Port is the container port published on 127.0.0.1 (HostAddr).
	Port int
	// Env is set in the container's environment, NAME=value each.
	Env []string
	// Mounts are bind mounts, "host-path:container-path[:ro]" each.
	Mounts []string
	// Args follow the image in `docker run` (the entrypoint's arguments).
	Args []string
	// Ready reports whether the service serves at hostAddr
	// ("127.0.0.1:<port>", where Port is published); StartService and
	// Container.Start poll it every 100 ms until it returns nil, for up
	// to ServeTimeout. Nil: the service is taken as ready once its port
	// is published.
	Ready func(hostAddr string) error
}

// StartService runs opts.Image in container <run id>-<name>, with host
// name and network alias name, on the network, with the run's labels (it
// is removed with the run, like a node), and waits until opts.Ready says
// it serves. Its fault methods (Kill, Stop, Start, Pause, Unpause,
// Disconnect, Connect) work as a node's; after Start it is polled with
// opts.Ready again. It gets no volume and none of the network's
// environment or mounts: what it writes lives in its container's own
// layer, which outlives Kill, Stop and Start.
func (n *Network) StartService(name string, opts ServiceOptions) (*Container, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("dockertest: service name %q: want lower-case letters, digits and dashes", name)
	}
	if n.Container(name) != nil {
		return nil, fmt.Errorf("dockertest: %s already runs on network %s", name, n.runID)
	}
	if opts.Image == "" || opts.Port <= 0 {
		return nil, fmt.Errorf("dockertest: service %s: an image and a port are needed", name)
	}
	ready := opts.Ready
	if ready == nil {
		ready = func(string) error { return nil } // served once published
	}
	c := &Container{net: n, name: name, id: n.runID + "-" + name, args: append([]string(nil), opts.Args...),
		port: opts.Port, image: opts.Image, ready: ready}
	var runOpts []string
	for _, e := range opts.Env {
		runOpts = append(runOpts, "--env", e)
	}
	for _, m := range opts.Mounts {
		runOpts = append(runOpts, "--volume", m)
	}
	return c, n.run(c, runOpts, opts.Args)
}

// HostAddr returns "127.0.0.1:<port>", where the host reaches the
// container's published port, or "" while it is not published (as URL).
func (c *Container) HostAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostAddr
}

// awaitReady polls ready at the published address every 100 ms until it
// returns nil, the container stops running, or timeout passes.
func (c *Container) awaitReady(ready func(hostAddr string) error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready(c.HostAddr())
		if err == nil {
			return nil
		}
		if !c.Running() {
			return fmt.Errorf("dockertest: %s stopped before serving (%s):\n%s", c.id, c.describe(), c.Logs())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockertest: %s did not serve within %s (%v):\n%s", c.id, timeout, err, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
