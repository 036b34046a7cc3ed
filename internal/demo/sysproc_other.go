//go:build !linux

package demo

import "os/exec"

// setProcAttrs does nothing outside Linux: there the children do not die with a demo that is
// killed (no Pdeathsig), though a Ctrl-C or a normal end still stops them.
func setProcAttrs(cmd *exec.Cmd) {}
