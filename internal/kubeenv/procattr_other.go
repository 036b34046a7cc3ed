//go:build !linux

package kubeenv

import "os/exec"

// setProcAttrs does nothing here: only Linux has Pdeathsig.
func setProcAttrs(*exec.Cmd) {}
