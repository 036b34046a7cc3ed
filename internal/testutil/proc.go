package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ChildEnv, set to a mode, makes a test binary whose TestMain is ChildMain act as a child
// process (run it with ChildArgs).
const ChildEnv = "MERIDIAN_TEST_CHILD"

// ChildArgs are the arguments of a test binary run as a child: no tests.
var ChildArgs = []string{"-test.run=^$"}

// ChildMain is the TestMain of packages whose tests run their own test binary as a child
// process, to start, stop and read one. Without ChildEnv it runs the tests (Main with run).
// With it, the binary does what the mode says and exits:
//   - "sleep" prints "sleeping", then, on SIGTERM, "terminated" and exits 0 (4 after a
//     minute, should the test lose it);
//   - "stubborn" ignores SIGTERM, prints "ignoring SIGTERM" and exits 4 after a minute;
//   - "lines" prints "line 1" to "line 5" and exits 3;
//   - "exit3" exits 3 at once, printing nothing;
//   - "listen ADDR" listens on the TCP address ADDR as a server would, and exits 3 with the
//     error (as Go prints it: "… bind: address already in use") when it cannot; otherwise it
//     prints "listening" and acts as "sleep".
//
// Any other mode exits 5.
func ChildMain(m *testing.M, run func(*testing.M) int) int {
	mode := os.Getenv(ChildEnv)
	if addr, ok := strings.CutPrefix(mode, "listen "); ok {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println(err)
			return 3
		}
		defer l.Close()
		fmt.Println("listening")
		mode = "sleep"
	}
	switch mode {
	case "":
		return Main(m, run)
	case "sleep":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("sleeping")
		select {
		case <-ch:
			fmt.Println("terminated")
			return 0
		case <-time.After(time.Minute):
			return 4
		}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Minute)
		return 4
	case "lines":
		for i := 1; i <= 5; i++ {
			fmt.Printf("line %d\n", i)
		}
		return 3
	case "exit3":
		return 3
	}
	return 5
}

// Buffer is a bytes.Buffer safe for concurrent use: a child process's output, written by the
// exec package's copier (or internal/child's) while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// KilledBy is the signal that ended a process, from its Wait error; 0 when it exited (or
// err is not an *exec.ExitError).
func KilledBy(err error) syscall.Signal {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// ProcStat is /proc/PID/stat's fields, numbered as proc(5) numbers them from 1 less one
// (state is [2], ppid [3]; the command, which may hold spaces, is left empty), or nil when
// it cannot be read (the process is gone, or this is not Linux).
func ProcStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		return append([]string{"", ""}, strings.Fields(s[i+1:])...)
	}
	return nil
}

// Running reports whether process pid exists and still runs: not a zombie (or dead) when
// /proc says, else whether a signal 0 reaches it.
func Running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	if st := ProcStat(pid); len(st) > 2 {
		return st[2] != "Z" && st[2] != "X"
	}
	return true
}
