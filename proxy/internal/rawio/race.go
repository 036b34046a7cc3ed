//go:build race && linux

package rawio

import "syscall"

// Under the race detector the calls go through syscall.Read and syscall.Write, which tell it
// what they read and write and order a write before the read that receives its bytes (as
// the detector sees every socket's): raw calls would hide both, and tests that synchronise
// through a socket would report races that are not there. Race builds are test builds; the
// raw path is the one that ships.

func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return n, errnoOf(err)
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return n, errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errno, ok := err.(syscall.Errno); ok {
		return errno
	}
	return syscall.EIO // syscall.Read and Write return Errno on Linux
}
