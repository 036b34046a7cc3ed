package schedstat

import (
	"os"
	"runtime"
	"testing"
)

// TestRunqueueWait: on Linux this process's wait is readable and not negative, by pid 0 and
// by its own pid; a process that does not exist is not ok.
func TestRunqueueWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, ok := RunqueueWait(0); ok {
			t.Error("ok outside Linux")
		}
		return
	}
	for _, pid := range []int{0, os.Getpid()} {
		if w, ok := RunqueueWait(pid); !ok || w < 0 {
			t.Errorf("RunqueueWait(%d) = %v, %v", pid, w, ok)
		}
	}
	if _, ok := RunqueueWait(1 << 30); ok {
		t.Error("a process that does not exist is ok")
	}
}
