// Package schedstat reads, for the load harnesses (bench and bench/dataplane), how long a
// process's threads waited runnable for a CPU: the second field of Linux's
// /proc/PID/task/*/schedstat. On a shared machine a large wait next to a small CPU time
// means the host, not Meridian, set the pace. It also reads a process's CPU time, the other
// half of that comparison, from the first field of the same files (nanoseconds, where
// /proc/PID/stat counts 10 ms ticks).
//
// It owns nothing and starts no goroutines. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package schedstat
