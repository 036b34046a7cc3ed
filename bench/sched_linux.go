package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
)

// runqueueWait returns the seconds the threads of process pid (0: this process) have spent
// runnable but waiting for a CPU (schedstat.RunqueueWait).
func runqueueWait(pid int) (float64, bool) { return schedstat.RunqueueWait(pid) }

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
