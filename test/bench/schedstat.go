package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The fair-share step asks how much of the light job's time on a busy
// machine is CPU contention: the engine's step loop, runnable but waiting
// for a CPU that other processes hold. Linux counts both sides for every
// thread in /proc/<pid>/task/<tid>/schedstat: nanoseconds on a CPU, then
// nanoseconds runnable in a run queue.

// threadTimes is each thread's schedstat, on a CPU and waiting for one, in
// nanoseconds, by process then thread.
type threadTimes map[int]map[int][2]uint64

// workerThreads samples the threads of every live worker process (their
// supervisors' children included).
func (st *fsStack) workerThreads() threadTimes {
	out := threadTimes{}
	for _, p := range st.s.Workers() {
		if p == nil || p.Exited() {
			continue
		}
		for _, pid := range processTree(p.PID()) {
			out[pid] = taskSchedstats(pid)
		}
	}
	return out
}

// processTree is pid and its descendants. A child is listed under the
// thread that started it, which for a Go parent is seldom the main one,
// so every thread's children are read.
func processTree(pid int) []int {
	pids := []int{pid}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, f := range strings.Fields(string(kids)) {
			if k, err := strconv.Atoi(f); err == nil {
				pids = append(pids, processTree(k)...)
			}
		}
	}
	return pids
}

// taskSchedstats reads every thread of pid.
func taskSchedstats(pid int) map[int][2]uint64 {
	out := map[int][2]uint64{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		run, _ := strconv.ParseUint(f[0], 10, 64)
		wait, _ := strconv.ParseUint(f[1], 10, 64)
		out[tid] = [2]uint64{run, wait}
	}
	return out
}

// engineRunWait is the workers' threads' time on a CPU and waiting for
// one between before and after, in seconds, summed. Their engine's step
// loop is most of it; it is summed over every thread, as the Go runtime
// may move the loop from one thread to another between steps.
func engineRunWait(before, after threadTimes) (run, wait float64) {
	for pid, threads := range after {
		for tid, t := range threads {
			b := before[pid][tid]
			if t[0] < b[0] || t[1] < b[1] {
				continue
			}
			run += float64(t[0]-b[0]) / 1e9
			wait += float64(t[1]-b[1]) / 1e9
		}
	}
	return run, wait
}
