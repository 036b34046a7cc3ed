// Package child is a process the load harnesses (bench and bench/dataplane) start: its output
// in a log file, GOTRACEBACK=all, killed by the kernel if the harness dies (Pdeathsig on
// Linux), stopped with SIGTERM then SIGKILL after a grace, and the end of its log for error
// messages.
//
// It owns one goroutine per process, which waits for it and ends when it exits; Stop and
// Kill return only after that. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package child
