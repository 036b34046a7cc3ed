// Package schedstat reads, for the load harnesses (bench and bench/dataplane), how long a
// process's threads waited runnable for a CPU: the second field of Linux's
// /proc/PID/task/*/schedstat. On a shared machine a large wait next to a small CPU time
// means the host, not Meridian, set the pace. It also reads a process's CPU time
// (/proc/PID/stat), the other half of that comparison.
//
// It owns nothing and starts no goroutines. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package schedstat
