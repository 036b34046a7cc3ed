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

// TestCPUSeconds: this process's CPU time is readable on Linux and grows with work; a
// process that does not exist is an error.
func TestCPUSeconds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for round := 0; ; round++ {
		for i := range 10_000_000 {
			x ^= i
		}
		after, err := CPUSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if round == 1000 { // 10^10 iterations without one clock tick of CPU
			t.Fatalf("CPU time stayed %.2fs (x %d)", after, x)
		}
	}
	if _, err := CPUSeconds(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
