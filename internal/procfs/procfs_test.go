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
	// Busy in this process: not the others'. Spin until the kernel has
	// counted about 300 ms of this process's own time, however long a
	// loaded machine takes to give it that, so the verdict is the
	// counting's and not the machine's load.
	cur := waitTicks(t, func() uint64 { return sample(t, os.Getpid()).Self - prev.Self }, 30, true)
	// The kernel counts a process's ticks and a CPU's apart: they can
	// differ by a tick or two (29 busy against 30 of its own, seen once
	// in CI).
	self, busy := cur.Self-prev.Self, cur.Busy-prev.Busy
	if cur.CPUs < 1 || float64(busy) < 0.9*float64(self) {
		t.Fatalf("samples %+v then %+v: want CPUs, and this process's own time among the busy", prev, cur)
	}
	// Busy in another process: the others'.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// The loop gets what the machine's other work leaves it: hold the
	// others' time to the loop's own, as its /proc/<pid>/stat counts it,
	// over as long as the loop takes to be counted 50 ticks.
	prev = sample(t, os.Getpid())
	before := sample(t, cmd.Process.Pid).Self
	waitTicks(t, func() uint64 { return sample(t, cmd.Process.Pid).Self - before }, 50, false)
	cur = sample(t, os.Getpid())
	loop := float64(sample(t, cmd.Process.Pid).Self-before) / float64(cur.Total-prev.Total) * float64(cur.CPUs)
	if o := cur.OthersBusy(prev); o < 0.8*loop {
		t.Errorf("another process's busy loop ran %.2f CPUs and counted as %.2f CPUs of others'", loop, o)
	}
}

// sample is SampleCPU of pid over every CPU, failing the test on error.
func sample(t *testing.T, pid int) CPUUse {
	t.Helper()
	u, err := SampleCPU(pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitTicks waits, busy in this goroutine when spin is set and asleep
// otherwise, until ticks() reaches want, and returns this process's
// sample then. A minute without is a failure: no machine is that starved.
func waitTicks(t *testing.T, ticks func() uint64, want uint64, spin bool) CPUUse {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for ticks() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks counted in a minute, want %d", ticks(), want)
		}
		if !spin {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
		}
	}
	return sample(t, os.Getpid())
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
