package main

import (
	"os"
	"time"

	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

// cpuSpan is the CPU time the stack's processes and the load generator
// used, and how busy the machine's CPUs were, over a span of wall time.
type cpuSpan struct {
	stack, busy, wall float64 // seconds; busy is summed over the CPUs
	// engineRun and engineWait: the workers' threads' time on a CPU and
	// runnable but waiting for one (schedstat.go).
	engineRun, engineWait float64
}

// engine is the workers' threads' CPUs' worth of time, and the share of
// their runnable time spent waiting for a CPU.
func (c cpuSpan) engine() (onCPU, waiting float64) {
	if c.wall <= 0 || c.engineRun+c.engineWait <= 0 {
		return 0, 0
	}
	return c.engineRun / c.wall, c.engineWait / (c.engineRun + c.engineWait)
}

// cores is the CPUs' worth of time the stack used, and the machine.
func (c cpuSpan) cores() (stack, machine float64) {
	if c.wall <= 0 {
		return 0, 0
	}
	return c.stack / c.wall, c.busy / c.wall
}

// cpuMeter measures a cpuSpan from start to stop.
type cpuMeter struct {
	st      *fsStack
	t0      time.Time
	ticks   uint64
	use     procfs.CPUUse
	threads threadTimes
}

func (st *fsStack) meterCPU() *cpuMeter {
	m := &cpuMeter{st: st, t0: time.Now(), ticks: st.cpuTicks(), threads: st.workerThreads()}
	m.use, _ = procfs.SampleCPU(os.Getpid(), nil)
	return m
}

// clockTick is Linux's USER_HZ: /proc's CPU times are in hundredths.
const clockTick = 100

func (m *cpuMeter) stop(into *cpuSpan) {
	ticks := m.st.cpuTicks()
	use, _ := procfs.SampleCPU(os.Getpid(), nil)
	into.wall += time.Since(m.t0).Seconds()
	into.stack += float64(ticks-m.ticks) / clockTick
	run, wait := engineRunWait(m.threads, m.st.workerThreads())
	into.engineRun += run
	into.engineWait += wait
	if use.Total > m.use.Total {
		// /proc/stat's ticks, of every CPU: busy share × CPUs × wall.
		into.busy += float64(use.Busy-m.use.Busy) / float64(use.Total-m.use.Total) * float64(use.CPUs) * time.Since(m.t0).Seconds()
	}
}

// cpuTicks is the CPU time, in clock ticks, that nats-server, the apis,
// the workers (their supervisors' children included) and this process
// used so far.
func (st *fsStack) cpuTicks() uint64 {
	// This process alone: the stack's processes are its children, and
	// are counted below, each once.
	n := procTicks(os.Getpid())
	var pids []int
	for _, p := range append([]*localstack.Proc{st.s.NATS, st.s.API}, append(st.extra, st.s.Workers()...)...) {
		if p != nil && !p.Exited() {
			pids = append(pids, p.PID())
		}
	}
	for _, pid := range pids {
		n += treeTicks(pid)
	}
	return n
}

// treeTicks is the CPU time of pid and of its descendants.
func treeTicks(pid int) uint64 {
	var n uint64
	for _, p := range processTree(pid) {
		n += procTicks(p)
	}
	return n
}

// procTicks is a process's user and system time, in clock ticks; none
// for one that has ended.
func procTicks(pid int) uint64 {
	n, _ := procfs.ProcessTicks(pid)
	return n
}
