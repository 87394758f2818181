// Package procfs reads the few facts genq takes from Linux's /proc: the
// CPU's name, which workers report as their device, and a process's peak
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
