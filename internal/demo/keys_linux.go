package demo

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// Keys puts the terminal on f into a mode where each keypress is read at once and not
// echoed (Ctrl-C still interrupts), and delivers the keys until ctx ends; the terminal is
// put back as it was then. It returns nil when f is not a terminal. Reads time out every
// 100 ms, so the reading goroutine notices ctx's end; it has ended when the channel closes.
func Keys(f *os.File) func(ctx context.Context) <-chan byte {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	return func(ctx context.Context) <-chan byte {
		raw := *old
		raw.Lflag &^= unix.ICANON | unix.ECHO
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 0, 1
		out := make(chan byte, 8)
		if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) != nil {
			close(out)
			return out
		}
		go func() {
			defer close(out)
			defer func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }()
			buf := make([]byte, 16)
			for ctx.Err() == nil {
				n, err := unix.Read(fd, buf)
				if err != nil && err != unix.EINTR && err != unix.EAGAIN {
					return
				}
				for _, b := range buf[:max(n, 0)] {
					select {
					case out <- b:
					default: // a key while the last ones are unread: dropped
					}
				}
			}
		}()
		return out
	}
}
