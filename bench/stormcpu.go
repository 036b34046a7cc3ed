package bench

import (
	"runtime"
	"time"

	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
)

// cpuReading is the CPU time of the run's processes at one moment, by kind (Linux
// schedstat; a process whose figure cannot be read counts 0 in both readings).
type cpuReading struct {
	at                          time.Time
	replicas, driver, api, etcd float64
}

// readCPU reads the CPU time of every live replica, of the harness and of the world's own
// processes (the API server and etcd, with SourceKubernetes). It reads files only, so that
// reading it just before a storm does not delay the storm much.
func (r *run) readCPU() cpuReading {
	c := cpuReading{at: time.Now()}
	for _, rep := range r.reps.list() {
		if s, err := schedstat.CPUSeconds(rep.Pid()); err == nil {
			c.replicas += s
		}
	}
	c.driver, _ = schedstat.CPUSeconds(0)
	if api, etcd := r.world.pids(); api > 0 {
		c.api, _ = schedstat.CPUSeconds(api)
		c.etcd, _ = schedstat.CPUSeconds(etcd)
	}
	return c
}

// stormWithCPU runs the storm (stormRun) between two readings of CPU time and, when every
// storm stream answered, keeps in r.stormUse what the storm's span cost each kind of
// process: whether the storm was bound by the machine's CPUs, and by whose work.
func (r *run) stormWithCPU() {
	before := r.readCPU()
	if !r.ld.stormRun(r.sctx, r.cfg, r.n, r.open) {
		return
	}
	after := r.readCPU()
	r.stormUse = &stormUse{
		spanSeconds: after.at.Sub(before.at).Seconds(),
		replicas:    after.replicas - before.replicas,
		driver:      after.driver - before.driver,
		world:       after.api - before.api + after.etcd - before.etcd,
		cpus:        runtime.NumCPU(),
	}
}

// stormUse is what a storm cost, from just before its first stream opened to its last
// stream's first message.
type stormUse struct {
	spanSeconds             float64
	replicas, driver, world float64 // CPU seconds
	cpus                    int
}

// fill sets res's storm CPU figures: the span, the CPU seconds by kind, and their sum as a
// share of what the machine's CPUs could give over the span.
func (u *stormUse) fill(res *RunResult) {
	if u == nil || u.spanSeconds <= 0 {
		return
	}
	res.StormSpanMs = u.spanSeconds * 1000
	res.StormCPUSecondsReplicas = u.replicas
	res.StormCPUSecondsDriver = u.driver
	res.StormCPUSecondsAPI = u.world
	res.StormCPUShare = (u.replicas + u.driver + u.world) / (u.spanSeconds * float64(u.cpus))
}
