//go:build race && linux

package rawio

import (
	"runtime"
	"unsafe"
)

// The race detector does not see what a raw system call reads or writes; syscall.Read and
// syscall.Write tell it, and so does this.
func raceRead(b []byte) { // the call read b (Write's data)
	if len(b) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&b[0]), len(b))
	}
}

func raceWrite(b []byte) { // the call wrote b (Read's buffer)
	if len(b) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&b[0]), len(b))
	}
}
