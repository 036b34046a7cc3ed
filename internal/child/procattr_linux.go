package child

import (
	"os/exec"
	"syscall"
)

// setProcAttrs gives the child a process group of its own (a terminal's Ctrl-C reaches the
// parent only, which stops its children in order) and has the kernel kill it when the thread
// that started it ends: Start keeps that thread for as long as the child lives, so the child
// goes when the parent dies, even by SIGKILL.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
