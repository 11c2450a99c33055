//go:build unix

package mcpgateway

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ownGroup makes cmd's process the leader of a process group of its own,
// so that signalGroup reaches what it starts too (npx starting node, a
// shell starting the server).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
}

// keepFilesFromChildren marks every file descriptor of the node above
// stderr close-on-exec. Go opens its own files so, but a descriptor the
// node inherited without the flag (from a shell, a supervisor) would pass
// on to every child: exec.Cmd closes nothing itself.
func keepFilesFromChildren() {
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
		return
	}
}
