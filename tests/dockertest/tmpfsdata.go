package dockertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// A node's data dir on a file system of bounded size that the host can
// fill (Options.DataTmpfsBytes): a tmpfs mounted on the host and bound
// into the container at /data. Unlike a volume on the host's disk, it can
// be filled to ENOSPC without filling the host's disk, and it survives
// the container's stops and restarts (a tmpfs volume of Docker's is
// unmounted, and emptied, when its container stops).

// mountTmpfsData mounts a tmpfs of size bytes for container c and returns
// its host path, or "" and why when the host does not allow it (mount
// needs root).
func (n *Network) mountTmpfsData(c *Container, size int64) (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("not root: cannot mount a tmpfs")
	}
	dir, err := os.MkdirTemp("", c.id+"-data-")
	if err != nil {
		return "", err
	}
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0700"
	if owner, err := n.imageOwner(); err != nil {
		os.Remove(dir)
		return "", err
	} else if owner != "" {
		opts += "," + owner // the image's user owns its data dir
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount -t tmpfs %s: %v: %s", dir, err, out)
	}
	n.mu.Lock()
	n.tmpfsDirs = append(n.tmpfsDirs, dir)
	n.mu.Unlock()
	return dir, nil
}

// imageOwner returns the tmpfs mount options that give the data dir to
// the user the image runs as ("uid=N,gid=M"), or "" for root.
func (n *Network) imageOwner() (string, error) {
	out, err := docker("image", "inspect", "--format", "{{.Config.User}}", n.image)
	if err != nil {
		return "", err
	}
	user := strings.TrimSpace(out)
	if user == "" || user == "0" || user == "root" {
		return "", nil
	}
	uid, gid, ok := strings.Cut(user, ":")
	if !ok {
		gid = uid
	}
	if _, err := strconv.Atoi(uid); err != nil {
		return "", fmt.Errorf("the image's user %q is not numeric", user)
	}
	if _, err := strconv.Atoi(gid); err != nil {
		return "", fmt.Errorf("the image's group %q is not numeric", user)
	}
	return "uid=" + uid + ",gid=" + gid, nil
}

// unmountTmpfsData unmounts and removes every tmpfs data dir of the
// network (after its containers are gone).
func (n *Network) unmountTmpfsData() error {
	n.mu.Lock()
	dirs := n.tmpfsDirs
	n.tmpfsDirs = nil
	n.mu.Unlock()
	var errs []error
	for _, dir := range dirs {
		if out, err := exec.Command("umount", "--lazy", dir).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("umount %s: %v: %s", dir, err, out))
			continue
		}
		if err := os.Remove(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DataDir returns the host path of the node's data dir when it is a tmpfs
// the host can fill (Options.DataTmpfsBytes), else "".
func (c *Container) DataDir() string { return c.dataDir }

// FillData fills the node's tmpfs data dir with a file until the file
// system has no room left (ENOSPC), and returns how to free it again.
func (c *Container) FillData() (free func() error, err error) {
	if c.dataDir == "" {
		return nil, fmt.Errorf("dockertest: %s has no tmpfs data dir to fill", c.id)
	}
	path := filepath.Join(c.dataDir, "fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	free = func() error { return os.Remove(path) }
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return free, nil // full
		}
	}
}
