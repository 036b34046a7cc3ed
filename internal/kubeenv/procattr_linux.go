package kubeenv

import (
	"os/exec"
	"syscall"
)

// setProcAttrs gives the child a process group of its own (a terminal's Ctrl-C reaches the
// parent, which stops it in order) and makes the kernel kill it when the parent dies.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
