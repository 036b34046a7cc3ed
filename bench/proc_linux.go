package bench

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill a replica when the harness dies.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
