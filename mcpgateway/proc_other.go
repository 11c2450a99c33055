//go:build !unix

package mcpgateway

import (
	"os/exec"
	"syscall"
)

// ownGroup does nothing where there are no process groups.
func ownGroup(*exec.Cmd) {}

// signalGroup sends sig to cmd's process, or kills it.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		cmd.Process.Kill()
		return
	}
	cmd.Process.Signal(sig)
}

// keepFilesFromChildren does nothing: where there is no fork, handles are
// not inherited unless asked for.
func keepFilesFromChildren() {}
