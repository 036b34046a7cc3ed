package bench

import (
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
