//go:build !linux

package charttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

const podSpecEnv = "MERIDIAN_CHARTTEST_POD_INIT"

type podInit struct {
	Binary       string
	Argv, Env    []string
	Dir          string
	ResolvConf   string
	Mounts       []bindMount
	ReadOnlyRoot bool
	UID, GID     int
	Groups       []int
	NoNewPrivs   bool
}

type bindMount struct {
	Source, Target string
	ReadOnly       bool
}

func runPodInit(string) {
	fmt.Fprintln(os.Stderr, "charttest: the stand-in kubelet runs on Linux only")
	os.Exit(127)
}

func podCommand(string) (*exec.Cmd, error) {
	return nil, errors.New("the stand-in kubelet runs on Linux only")
}
