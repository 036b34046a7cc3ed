package schedstat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RunqueueWait returns the seconds the threads of process pid (0: this process) have spent
// runnable but waiting for a CPU; ok is false when it cannot be read (not Linux, no such
// process, a line it does not understand).
func RunqueueWait(pid int) (seconds float64, ok bool) {
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
