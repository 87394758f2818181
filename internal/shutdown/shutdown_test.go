package shutdown_test

import (
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/genq/genq/internal/shutdown"
)

// The test binary runs itself as the child, with SIGINT ignored or not, as
// a shell's background job or a foreground command would start it.
func TestSignals(t *testing.T) {
	if os.Getenv("SHUTDOWN_CHILD") == "1" {
		ctx, stop := shutdown.OnSignal(t.Context())
		defer stop()
		os.Stdout.WriteString("ready\n")
		select {
		case <-ctx.Done():
			os.Stdout.WriteString("stopped\n")
		case <-time.After(time.Second):
			os.Stdout.WriteString("still running\n")
		}
		return
	}
	for _, tc := range []struct {
		name         string
		ignoreSIGINT bool
		send         syscall.Signal
		wantSaid     string // the child's last words: it stopped, or the signal left it running
	}{
		{"SIGINT ends a foreground process", false, syscall.SIGINT, "stopped\n"},
		{"SIGINT is left ignored in a background job", true, syscall.SIGINT, "still running\n"},
		{"SIGTERM ends a background job", true, syscall.SIGTERM, "stopped\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestSignals$")
			cmd.Env = append(os.Environ(), "SHUTDOWN_CHILD=1")
			if tc.ignoreSIGINT {
				// A shell ignores SIGINT in the child between fork and exec;
				// here the parent ignores it, and the child inherits that.
				ignoreSIGINT(t)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			n, _ := out.Read(buf) // "ready": the child listens
			if string(buf[:n]) != "ready\n" {
				t.Fatalf("child said %q", buf[:n])
			}
			if err := cmd.Process.Signal(tc.send); err != nil {
				t.Fatal(err)
			}
			rest := make([]byte, 64)
			m, _ := out.Read(rest)
			_ = cmd.Wait()
			got := string(rest[:m])
			if got != tc.wantSaid {
				t.Fatalf("after %s the child said %q (%v); want %q", tc.send, got, cmd.ProcessState, tc.wantSaid)
			}
		})
	}
	if got := shutdown.Signals(); !slices.Contains(got, os.Signal(syscall.SIGTERM)) {
		t.Fatalf("Signals() = %v, lacks SIGTERM", got)
	}
}

// ignoreSIGINT ignores SIGINT in this process, whose children inherit it,
// until the test ends.
func ignoreSIGINT(t *testing.T) {
	signal.Ignore(os.Interrupt)
	t.Cleanup(func() { signal.Reset(os.Interrupt) })
}
