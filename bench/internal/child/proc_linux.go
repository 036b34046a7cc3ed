package child

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill the process when the harness dies.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
