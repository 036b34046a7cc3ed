package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runqueueWait returns the seconds the threads of process pid (0: this process) have spent
// runnable but waiting for a CPU, from /proc/PID/task/*/schedstat; ok is false when it cannot
// be read. A large figure next to a small CPU time means the host, not Meridian, set the pace.
func runqueueWait(pid int) (float64, bool) {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, false
		}
		ns += v
	}
	return ns / 1e9, true
}

// selfCPUSeconds returns this process's user and system CPU time.
func selfCPUSeconds() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), true
}

// rssBytes returns the resident set size of process pid, from /proc/PID/status (VmRSS);
// ok is false when it cannot be read.
func rssBytes(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
