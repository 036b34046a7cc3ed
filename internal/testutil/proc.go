package testutil

import (
	"bytes"
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

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
