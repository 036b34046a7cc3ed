// Package rawio reads and writes the proxy's TCP sockets without the runtime's system-call
// bookkeeping. Wrap turns an accepted or dialled *net.TCPConn into a Conn whose Read and Write
// make the read(2) and write(2) calls with syscall.RawSyscall inside the connection's
// syscall.RawConn: the socket is non-blocking, so the call never blocks, and waiting for
// readiness, deadlines and Close stay the runtime poller's, as for a net.TCPConn.
//
// Why: syscall.Syscall enters the runtime's syscall state. A proxy's process is idle between
// requests, so the runtime's monitor thread (sysmon) sleeps, and the first system call of each
// request wakes it; while it is awake, a write that lasts its 20 µs tick hands the processor
// to another thread. Measured with perf on the proxy pair at 2,000 requests/s, the monitor's
// wake-ups and the hand-offs were about a quarter of a proxy's CPU time, all of it on the
// request path's cores. A read or write of a non-blocking socket needs neither.
//
// A Conn is a net.Conn with every other method of the *net.TCPConn it wraps (CloseWrite,
// SetLinger, SyscallConn, ReadFrom's splice for opaque copies, ...), and NetConn returns that
// *net.TCPConn (origdst reads the original destination through it). Like any net.Conn it is
// safe for concurrent use: Reads are serialized, and Writes, as the runtime serializes them on
// a *net.TCPConn. A successful Read or Write allocates nothing.
//
// It owns no goroutines. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package rawio
