package dataplane

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill a child when the harness dies.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
