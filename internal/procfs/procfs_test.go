package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "info")
	if err := os.WriteFile(path, []byte("processor\t: 0\nmodel name\t: Some CPU  \nmodel name\t: second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"model name": "Some CPU", "processor": "0", "missing": ""} {
		if got := Field(path, key); got != want {
			t.Errorf("Field(%q) = %q, want %q", key, got, want)
		}
	}
	if got := Field(filepath.Join(t.TempDir(), "none"), "x"); got != "" {
		t.Errorf("Field of a missing file = %q", got)
	}
}

func TestPeakRSSMiB(t *testing.T) {
	if got := PeakRSSMiB(os.Getpid()); got <= 0 {
		t.Fatalf("PeakRSSMiB(self) = %v", got)
	}
	if got := PeakRSSMiB(-1); got != -1 {
		t.Fatalf("PeakRSSMiB of no process = %v, want -1", got)
	}
}

// TestOthersBusy: this process's own work counts as its own, and a busy
// loop in another process shows as about one CPU of others' time (at
// least: the machine may be busy with more).
func TestOthersBusy(t *testing.T) {
	prev, err := SampleCPU(os.Getpid(), nil)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// Busy in this process: not the others'.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	cur, err := SampleCPU(os.Getpid(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 300 ms of one CPU is about 30 ticks of 10 ms. The kernel counts a
	// process's ticks and a CPU's apart: they can differ by a tick or two
	// (29 busy against 30 of its own, seen once in CI).
	self, busy := cur.Self-prev.Self, cur.Busy-prev.Busy
	if cur.CPUs < 1 || self < 20 || float64(busy) < 0.9*float64(self) {
		t.Fatalf("samples %+v then %+v: want CPUs, and 300 ms of this process's own time among the busy", prev, cur)
	}
	// Busy in another process: the others'.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(100 * time.Millisecond)
	// The loop gets what the machine's other work leaves it: hold the
	// others' time to the loop's own, as its /proc/<pid>/stat counts it.
	child := func() uint64 {
		u, err := SampleCPU(cmd.Process.Pid, nil)
		if err != nil {
			t.Fatal(err)
		}
		return u.Self
	}
	prev, _ = SampleCPU(os.Getpid(), nil)
	before := child()
	time.Sleep(500 * time.Millisecond)
	cur, _ = SampleCPU(os.Getpid(), nil)
	loop := float64(child()-before) / float64(cur.Total-prev.Total) * float64(cur.CPUs)
	if o := cur.OthersBusy(prev); o < 0.8*loop || loop < 0.1 {
		t.Errorf("another process's busy loop ran %.2f CPUs and counted as %.2f CPUs of others'", loop, o)
	}
}

// TestAvailableMemory: this machine has some memory free, and no more
// than /proc/meminfo's total.
func TestAvailableMemory(t *testing.T) {
	total := kiB(Field("/proc/meminfo", "MemTotal"))
	if total == 0 {
		t.Skip("no /proc/meminfo")
	}
	if got := AvailableMemory(); got == 0 || got > total {
		t.Fatalf("AvailableMemory = %d, want above 0 and at most MemTotal %d", got, total)
	}
	for v, want := range map[string]uint64{"2048 kB": 2 << 20, " 1 kB": 1 << 10, "": 0, "x kB": 0} {
		if got := kiB(v); got != want {
			t.Errorf("kiB(%q) = %d, want %d", v, got, want)
		}
	}
}
