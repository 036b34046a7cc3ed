package charttest

// podSpecEnv names the file holding a podInit when the test binary is started as a pod's init.
const podSpecEnv = "MERIDIAN_CHARTTEST_POD_INIT"

// podInit is what the init (the test binary, re-executed in a new mount namespace) does
// before it becomes the container's process (runPodInit, on Linux only).
type podInit struct {
	Binary string
	Argv   []string
	Env    []string
	Dir    string
	// ResolvConf becomes /etc/resolv.conf.
	ResolvConf string
	// Mounts are bind mounts of host directories (the pod's volumes) onto their mountPaths.
	Mounts []bindMount
	// ReadOnlyRoot remounts / read-only (readOnlyRootFilesystem).
	ReadOnlyRoot bool
	UID, GID     int
	Groups       []int
	NoNewPrivs   bool
}

type bindMount struct {
	Source, Target string
	ReadOnly       bool
}
