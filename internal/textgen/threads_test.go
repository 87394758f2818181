package textgen

import (
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestThreadGovernorMakesRoom: while other processes keep all but one CPU
// busy, steps compute on one thread; the governor never asks for more
// threads than Open chose.
func TestThreadGovernorMakesRoom(t *testing.T) {
	cpus := runtime.NumCPU()
	if cpus < 2 {
		t.Skip("one CPU: nothing to govern")
	}
	g := newThreadGovernor(cpus)
	now := time.Now()
	if n := g.threads(now); n < 1 || n > cpus {
		t.Fatalf("threads %d of %d", n, cpus)
	}
	for range cpus - 1 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	n := cpus
	for i := range 12 {
		time.Sleep(governEvery)
		if n = g.threads(now.Add(time.Duration(i+1) * governEvery)); n == 1 {
			break
		}
	}
	if n != 1 {
		t.Fatalf("with %d of %d CPUs busy elsewhere the steps compute on %d threads, want 1 (others busy: %.2f CPUs)", cpus-1, cpus, n, g.others)
	}
}

// TestThreadGovernorForgetsIdleSpells: what other processes did while the
// loop was idle (no step asked for threads) does not count against the
// next step; only readings taken while stepping are averaged.
func TestThreadGovernorForgetsIdleSpells(t *testing.T) {
	cpus := runtime.NumCPU()
	if cpus < 2 {
		t.Skip("one CPU: nothing to govern")
	}
	g := newThreadGovernor(cpus)
	now := time.Now()
	g.threads(now)
	time.Sleep(governEvery)
	now = now.Add(governEvery)
	g.threads(now)
	before := g.others

	// The idle spell: every CPU busy elsewhere, and no step asks.
	var busy []*exec.Cmd
	for range cpus {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		busy = append(busy, cmd)
	}
	time.Sleep(2 * staleAfter)
	for _, cmd := range busy {
		cmd.Process.Kill()
		cmd.Wait()
	}
	g.threads(now.Add(2*staleAfter + governEvery))
	if g.others != before {
		t.Fatalf("others busy went from %.2f to %.2f CPUs over an idle spell; want it unchanged", before, g.others)
	}
}
