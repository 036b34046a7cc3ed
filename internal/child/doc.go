// Package child runs the child processes of Meridian's harnesses: the bench's replicas, the
// proxy bench's control plane, proxies and nginx, the local mesh's (`make run`) every
// component, and the API server and etcd that internal/kubeenv starts. It is the one way they
// start, stop, wait for and report a child.
//
// A child's output goes to a log file, appended or emptied first (and is copied to a
// writer, when given). It runs in
// a process group of its own, so a terminal's Ctrl-C reaches the parent only, which stops it
// in order; on Linux the kernel kills it when the parent dies (Pdeathsig), because it is
// started, and waited for, from a goroutine locked to its OS thread for the child's whole
// life: Pdeathsig fires when the thread that forked the child ends, and Go ends a thread when
// a goroutine locked to it returns. Stop sends SIGTERM, then SIGKILL after a grace. WaitHTTP
// polls a URL until it answers 200, the child exits or a timeout passes; Failure and LogTail
// give the end of the log for error messages. FreePort picks a loopback port for a child to
// listen on, and the errors of a child that exited because its port was taken meanwhile wrap
// ErrAddrInUse, so that its caller can start it again on fresh ports.
//
// It owns one goroutine per child, which waits for it and ends when it exits; Stop and Kill
// return only after that. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package child
