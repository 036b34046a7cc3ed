package schedstat

import (
	"math"
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

// TestCPUSeconds: this process's CPU time is readable on Linux and grows with work, finer than
// /proc/PID/stat's 10 ms clock ticks: a little work shows as an increase that is not a
// whole number of ticks. A process that does not exist is an error.
func TestCPUSeconds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	x := 0
	for attempt := 0; ; attempt++ {
		before, err := CPUSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 1_000_000 { // about a millisecond
			x ^= i
		}
		after, err := CPUSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		ticks := (after - before) / 0.01
		if after > before && math.Abs(ticks-math.Round(ticks)) > 1e-6 {
			break
		}
		if attempt == 100 {
			t.Fatalf("CPU time went from %.9fs to %.9fs: not finer than clock ticks (x %d)", before, after, x)
		}
	}
	if _, err := CPUSeconds(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
