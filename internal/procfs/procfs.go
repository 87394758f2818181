// Package procfs reads the few facts genq takes from Linux's /proc: the
// CPU's name, which workers report as their device, the memory available,
// which sizes a text worker's context on the CPU, and a process's peak
// memory, which benchmarks and chaos runs report.
package procfs

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Field returns the value of the first "key: value" line of a proc file,
// or "" when the file or the key is missing.
func Field(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// CPUName is the processor's name from /proc/cpuinfo, or the architecture
// where there is none.
func CPUName() string {
	if name := Field("/proc/cpuinfo", "model name"); name != "" {
		return name
	}
	return runtime.GOARCH
}

// PeakRSSMiB is a process's high-water resident set (VmHWM) in MiB, memory
// outside the Go heap included, or -1 when the process is gone.
func PeakRSSMiB(pid int) float64 {
	v := Field("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM")
	kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(v, "kB")))
	if err != nil {
		return -1
	}
	return float64(kb) / 1024
}

// AvailableMemory is how many bytes of memory a process can take now
// without swapping or being killed: /proc/meminfo's MemAvailable, less
// where the process's cgroup (a container's limit) allows less; 0 when
// neither can be read.
func AvailableMemory() uint64 {
	avail := kiB(Field("/proc/meminfo", "MemAvailable"))
	if limit, used, ok := cgroupMemory(); ok && limit > used && (avail == 0 || limit-used < avail) {
		avail = limit - used
	}
	return avail
}

// kiB reads a "1234 kB" value as bytes; 0 when it is not one.
func kiB(v string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// cgroupMemory is the cgroup v2 limit of this process's group and what
// the group uses, when it has a limit.
func cgroupMemory() (limit, used uint64, ok bool) {
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil // "max" is no limit
	}
	limit, okLimit := read("memory.max")
	used, okUsed := read("memory.current")
	return limit, used, okLimit && okUsed
}

// CPUUse is a sample of CPU time, in clock ticks since boot: the busy and
// total time of the CPUs this process may run on, and the time the process
// itself has used. Two samples tell how busy the other processes kept
// those CPUs in between (OthersBusy).
type CPUUse struct {
	Busy, Total, Self uint64
	CPUs              int
}

// SampleCPU reads /proc/stat's lines of the CPUs in cpus (all of them when
// nil) and /proc/<pid>/stat.
func SampleCPU(pid int, cpus []int) (CPUUse, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUUse{}, err
	}
	var u CPUUse
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	for _, line := range strings.Split(string(stat), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(fields[0][3:])
		if err != nil || len(cpus) > 0 && !want[n] {
			continue
		}
		// user nice system idle iowait irq softirq steal …
		for i, f := range fields[1:] {
			v, _ := strconv.ParseUint(f, 10, 64)
			if i >= 8 { // guest time is counted in user already
				break
			}
			u.Total += v
			if i != 3 && i != 4 { // idle, iowait
				u.Busy += v
			}
		}
		u.CPUs++
	}
	u.Self, err = ProcessTicks(pid)
	if err != nil {
		return CPUUse{}, err
	}
	return u, nil
}

// ProcessTicks is the user and system time process pid has used, in clock
// ticks, from /proc/<pid>/stat.
func ProcessTicks(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command may hold spaces: the fields that follow start after its ')'.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, os.ErrInvalid
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return utime + stime, nil
}

// OthersBusy is how many CPUs' worth of time processes other than this one
// were busy from prev to u.
func (u CPUUse) OthersBusy(prev CPUUse) float64 {
	total := float64(u.Total - prev.Total)
	if total <= 0 || u.CPUs == 0 {
		return 0
	}
	others := float64(u.Busy-prev.Busy) - float64(u.Self-prev.Self)
	return max(0, others/total*float64(u.CPUs))
}
