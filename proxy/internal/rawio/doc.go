// Package rawio is the proxy's data-path socket I/O: Wrap gives a TCP connection whose Read
// and Write make the read and write system calls without entering the runtime's system-call
// state (syscall.RawSyscall, inside the connection's syscall.RawConn). They cannot block: the
// runtime's sockets are non-blocking, and a call that would block returns EAGAIN, after which
// the goroutine waits in the runtime's poller as net.Conn's own Read and Write do. Deadlines,
// Close and every other method are the *net.TCPConn's; NetConn returns it, and File refuses
// (its descriptor would make the socket blocking). Race-detector builds call syscall.Read and
// syscall.Write instead, which tell the detector what they touch and what they order.
//
// Why: in a proxy that goes idle between requests, the first ordinary system call after each
// idle spell wakes the runtime's monitor thread (sysmon) from its deep sleep, a futex wake on
// the request's path, and sysmon then polls every 20 µs until the process idles again (a
// loopback write that outlasts one of its ticks can also have its processor handed to
// another thread). In `meridian bench proxy` at 2,000 HTTP/1.1 requests/s, sysmon's thread
// took about a quarter of a proxy's CPU samples, and rawio cuts each proxy's CPU per request
// by about 30% (HTTP/1.1) and 40% (gRPC). The cost: a raw write keeps the proxy's processor
// for its whole loopback delivery, while its other goroutines wait. On 2026-12-05 that made
// the HTTP/1.1 added p50 about 7% worse over 17 alternated runs, and rawio was taken out
// (5d457eb); on 2026-12-07 HTTP/1.1's added p50 and p99 and gRPC's p99 were better with it in
// every alternated run and gRPC's median slightly worse (README, the proxy benchmark), and it
// came back for the CPU.
//
// HTTP/2 is the exception. Ordinary switches a Conn back to the runtime's own calls, and the
// proxies call it for every connection that carries HTTP/2 (inbound: a session detected or
// declared as HTTP/2 and its connections to the application; outbound: a client connection
// detected as HTTP/2 and every endpoint connection dialled for HTTP/2). In alternated runs on
// 2026-12-07, gRPC's added p50 was 0.09–0.17 ms behind nginx's pair's with raw calls and
// 0.08–0.11 ms ahead of it with ordinary ones, at about twice the CPU per gRPC request
// (README). Why the HTTP/2 relay gains was not established; probably the hand-off above: the
// relay reads and writes both directions of a connection at once, and while one goroutine's
// write is in an ordinary system call, the other can have the processor, where a raw write
// would keep it. An HTTP/1.1 exchange, one request at a time, has nothing to run meanwhile.
//
// It owns no goroutines. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package rawio
