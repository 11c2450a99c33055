package dockertest

import (
	"fmt"
	"slices"

	"github.com/carmyhq/carmy/tests/testutil"
)

// StartHelper runs a program of the network's image other than carmy in
// container <run id>-<name>, with host name and network alias name:
// `docker run --entrypoint <entrypoint> <image> args…`, port published on
// 127.0.0.1 at a port Docker picks. It waits until the program answers
// GET /healthz on that port, like a node. Helpers get no volume and no
// environment of the network's; they are removed with the run.
func (n *Network) StartHelper(name, entrypoint string, port int, args ...string) (*Container, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("dockertest: helper name %q: want lower-case letters, digits and dashes", name)
	}
	if n.Container(name) != nil {
		return nil, fmt.Errorf("dockertest: %s already runs on network %s", name, n.runID)
	}
	c := &Container{net: n, name: name, id: n.runID + "-" + name, args: append([]string(nil), args...), port: port}
	return c, n.run(c, []string{"--entrypoint", entrypoint}, args)
}

// Remove deletes node name's container and its volume (`docker rm -f`,
// `docker volume rm`): the node is gone with its data, and the name is free
// for a new Launch (a node that starts over with an empty data dir).
func (n *Network) Remove(name string) error {
	c := n.Container(name)
	if c == nil {
		return fmt.Errorf("dockertest: no container %s on network %s", name, n.runID)
	}
	if _, err := docker("rm", "--force", c.id); err != nil {
		return err
	}
	if c.dataDir == "" {
		if _, err := docker("volume", "rm", "--force", c.id); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.containers = slices.DeleteFunc(n.containers, func(x *Container) bool { return x == c })
	n.mu.Unlock()
	c.setHostAddr("")
	return nil
}

// SetIP gives a stopped container the address ip on the network (it is
// disconnected and connected again with its alias and that --ip): when it
// starts, its node resolves its host name to ip. Tests use it to make
// nodes come back on each other's former addresses.
func (c *Container) SetIP(ip string) error {
	if c.Running() {
		return fmt.Errorf("dockertest: %s runs: stop it before changing its address", c.id)
	}
	if _, err := docker("network", "disconnect", c.net.runID, c.id); err != nil {
		return err
	}
	if _, err := docker("network", "connect", "--alias", c.name, "--ip", ip, c.net.runID, c.id); err != nil {
		return err
	}
	c.mu.Lock()
	c.ip = ip
	c.mu.Unlock()
	return nil
}

// Probes returns where the host reaches each container's API, for
// testutil.AgreedLeader; a container without a published port (down, cut
// off, removed: nil) is an error naming it.
func Probes(cs []*Container) ([]testutil.Probe, error) {
	probes := make([]testutil.Probe, len(cs))
	for i, c := range cs {
		if c == nil || c.URL() == "" {
			name := "a removed node"
			if c != nil {
				name = c.Name()
			}
			return nil, fmt.Errorf("%s: no published port", name)
		}
		probes[i] = testutil.Probe{Name: c.Name(), URL: c.URL()}
	}
	return probes, nil
}
