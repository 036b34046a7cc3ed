//go:build !linux

package charttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

func runPodInit(string) {
	fmt.Fprintln(os.Stderr, "charttest: the stand-in kubelet runs on Linux only")
	os.Exit(127)
}

func podCommand(string) (*exec.Cmd, error) {
	return nil, errors.New("the stand-in kubelet runs on Linux only")
}
