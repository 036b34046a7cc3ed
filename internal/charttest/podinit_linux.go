//go:build linux

package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// runPodInit sets the pod up as init describes (it runs as root in a fresh mount namespace)
// and execs the container's binary; it never returns.
func runPodInit(path string) {
	runtime.LockOSThread() // prctl and exec on one thread
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "charttest pod init: "+format+"\n", a...)
		os.Exit(127)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	var in podInit
	if err := json.Unmarshal(b, &in); err != nil {
		die("%s: %v", path, err)
	}
	if err := setUpMounts(&in); err != nil {
		die("%v", err)
	}
	if err := dropPrivileges(&in); err != nil {
		die("%v", err)
	}
	if in.Dir == "" {
		in.Dir = "/"
	}
	if err := os.Chdir(in.Dir); err != nil {
		die("workingDir %s: %v", in.Dir, err)
	}
	err = syscall.Exec(in.Binary, in.Argv, in.Env)
	die("exec %s: %v", in.Binary, err)
}

// setUpMounts makes the mount namespace private, puts a tmpfs on /run (where the chart's
// mountPaths live: /var/run is /run), the pod's resolv.conf over /etc/resolv.conf, and the
// volumes on their mountPaths.
func setUpMounts(in *podInit) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	resolv, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil {
		resolv = "/etc/resolv.conf"
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on /run: %w", err)
	}
	if strings.HasPrefix(resolv, "/run/") {
		// The host's resolv.conf lives under /run, now hidden: write the pod's there.
		if err := writeFileAll(resolv, in.ResolvConf); err != nil {
			return err
		}
	} else {
		f := "/run/.charttest-resolv.conf"
		if err := writeFileAll(f, in.ResolvConf); err != nil {
			return err
		}
		if err := unix.Mount(f, resolv, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind resolv.conf over %s: %w", resolv, err)
		}
	}
	for _, m := range in.Mounts {
		target := m.Target
		if t, ok := strings.CutPrefix(target, "/var/run/"); ok {
			target = "/run/" + t
		}
		if !strings.HasPrefix(target, "/run/") {
			if st, err := os.Stat(target); err != nil || !st.IsDir() {
				return fmt.Errorf("mountPath %s: only paths under /run (/var/run) or existing directories can be emulated", m.Target)
			}
		} else if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", m.Target, err)
			}
		}
	}
	if in.ReadOnlyRoot {
		if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			fmt.Fprintf(os.Stderr, "charttest pod init: cannot make / read-only (%v); readOnlyRootFilesystem not emulated\n", err)
		}
	}
	return nil
}

func writeFileAll(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// dropPrivileges becomes the pod's user, and then re-arms the parent-death signal (a
// credential change clears it) so that the process still dies with the test binary.
func dropPrivileges(in *podInit) error {
	ppid := os.Getppid()
	if err := syscall.Setgroups(in.Groups); err != nil {
		return fmt.Errorf("setgroups %v: %w", in.Groups, err)
	}
	if err := syscall.Setgid(in.GID); err != nil {
		return fmt.Errorf("setgid %d: %w", in.GID, err)
	}
	if err := syscall.Setuid(in.UID); err != nil {
		return fmt.Errorf("setuid %d: %w", in.UID, err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PDEATHSIG: %w", err)
	}
	if os.Getppid() != ppid {
		return fmt.Errorf("the test binary died")
	}
	if in.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl NO_NEW_PRIVS: %w", err)
		}
	}
	return nil
}

// podCommand returns the command that starts init: the test binary itself, in a new mount
// namespace, killed when the test binary dies.
func podCommand(specFile string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{podSpecEnv + "=" + specFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
	return cmd, nil
}
