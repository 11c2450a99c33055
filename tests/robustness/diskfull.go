package robustness

import (
	"fmt"
)

// The disk-full nemeses (docs/operations.md#a-full-disk): a node's data dir fills up (a file
// written until ENOSPC into its tmpfs, from the host) for the fault's
// hold, then is freed. The node stays up, refuses writes it cannot log
// (a leader hands over), and takes writes again once there is room;
// nothing acknowledged is lost, which the checkers verify as after any
// fault.
const (
	faultDiskFullLeader   = "disk-full-leader"
	faultDiskFullFollower = "disk-full-follower"
)

// dataTmpfsBytes bounds each node's data dir: room for a run's log and
// snapshots (the large-results nemesis adds tens of MiB each time), and
// what a disk-full fault fills, in memory, one node at a time.
const dataTmpfsBytes = 1 << 30

// injectDiskFull fills target's data dir; its heal frees it. Where the
// host cannot mount a tmpfs (not root), the fault is skipped, and says so.
func (nm *nemesis) injectDiskFull(target string) (heal func() error, targets []string, err error) {
	if why := nm.c.net.TmpfsUnavailable(); why != nil {
		return nil, []string{target + " (skipped: " + why.Error() + ")"}, nil
	}
	n := nm.c.node(target)
	if n == nil {
		return nil, []string{target}, fmt.Errorf("%s is not running", target)
	}
	free, err := n.FillData()
	if err != nil {
		return free, []string{target}, err
	}
	return free, []string{target}, nil
}
