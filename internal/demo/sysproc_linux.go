package demo

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the child in a process group of its own (the terminal's Ctrl-C reaches
// the demo only, which stops its children in order) and has the kernel kill it when the
// thread that started it, the supervisor's spawner, ends: when the demo dies, even by SIGKILL.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
