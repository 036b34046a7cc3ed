package schedstat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The fields of /proc/PID/task/TID/schedstat: nanoseconds on a CPU, nanoseconds runnable
// waiting for one, and the number of times the thread ran.
const (
	fieldOnCPU = iota
	fieldWaiting
)

// RunqueueWait returns the seconds the threads of process pid (0: this process) have spent
// runnable but waiting for a CPU; ok is false when it cannot be read (not Linux, no such
// process, a line it does not understand).
func RunqueueWait(pid int) (seconds float64, ok bool) {
	s, err := taskSeconds(pid, fieldWaiting)
	return s, err == nil
}

// CPUSeconds returns the CPU time (user and system) of process pid's threads, to the
// nanosecond: what /proc/PID/stat gives in 10 ms clock ticks, too coarse for a short
// segment of a lightly loaded process (a proxy's 200 requests take a few milliseconds).
// A thread that has ended no longer counts; the processes measured (Go runtimes, which
// keep their threads, and single-threaded nginx workers) end none while they run.
func CPUSeconds(pid int) (float64, error) { return taskSeconds(pid, fieldOnCPU) }

// taskSeconds sums one nanosecond field of the schedstat of process pid's threads (0: this
// process), in seconds.
func taskSeconds(pid, field int) (float64, error) {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) <= field {
			return 0, fmt.Errorf("%s/%s/schedstat: %d fields", dir, t.Name(), len(f))
		}
		v, err := strconv.ParseFloat(f[field], 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		ns += v
	}
	return ns / 1e9, nil
}
