package localstack

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// PeakRSS reads a process's high-water resident set (VmHWM) in MiB, or -1
// when the process is gone.
func PeakRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb / 1024
		}
	}
	return -1
}

// CPUModel names this machine's processor, for the hardware line of a
// report.
func CPUModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			_, v, _ := strings.Cut(line, ":")
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// ReplaceSection rewrites the text between the begin and end markers of
// the Markdown file at path, keeping the hand-written text around it: the
// generated figures of `make chaos` and `make bench` live in such sections.
func ReplaceSection(path, begin, end, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i]+begin+"\n"+body+end+s[j+len(end):]), 0o644)
}
