package bench

import (
	"runtime"
	"time"

	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
)

// cpuReading is the CPU time of the run's processes at one moment (Linux schedstat; the
// harness's from getrusage, which counts its threads that ended too).
type cpuReading struct {
	at       time.Time
	replicas map[int]float64 // by pid: the replicas alive and readable
	driver   float64
	world    map[int]float64 // by pid: the API server and etcd
}

// readCPU reads the CPU time of every live replica, of the harness and of the world's own
// processes (the API server and etcd, with SourceKubernetes). It reads files only, so that
// reading it just before a storm does not delay the storm much.
func (r *run) readCPU() cpuReading {
	c := cpuReading{at: time.Now(), replicas: map[int]float64{}, world: map[int]float64{}}
	read := func(into map[int]float64, pid int) {
		if s, err := schedstat.CPUSeconds(pid); err == nil {
			into[pid] = s
		}
	}
	for _, rep := range r.reps.list() {
		read(c.replicas, rep.Pid())
	}
	c.driver, _ = selfCPUSeconds()
	if api, etcd := r.world.pids(); api > 0 {
		read(c.world, api)
		read(c.world, etcd)
	}
	return c
}

// spent sums, over the processes both readings saw, the CPU seconds each spent between them:
// a replica killed or started in between counts for neither reading, rather than for one.
func spent(before, after map[int]float64) float64 {
	var s float64
	for pid, a := range after {
		if b, ok := before[pid]; ok {
			s += a - b
		}
	}
	return s
}

// stormWithCPU runs the storm (stormRun) between two readings of CPU time and, when every
// storm stream answered, keeps in r.stormUse what each kind of process spent over the
// storm's span: whether the storm was bound by the machine's CPUs. The span holds the
// churn and the streams opened before too, so these are the CPUs' use while the storm
// lasted, not the storm's own cost.
func (r *run) stormWithCPU() {
	before := r.readCPU()
	if !r.ld.stormRun(r.sctx, r.cfg, r.n, r.open) {
		return
	}
	after := r.readCPU()
	r.stormUse = &stormUse{
		spanSeconds: after.at.Sub(before.at).Seconds(),
		replicas:    spent(before.replicas, after.replicas),
		driver:      after.driver - before.driver,
		world:       spent(before.world, after.world),
		cpus:        runtime.NumCPU(),
	}
}

// stormUse is the CPU the run's processes spent from just before a storm's first stream
// opened to its last stream's first message.
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
