package shutdown_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
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
		fmt.Printf("ready %d\n", os.Getpid())
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
			if tc.ignoreSIGINT {
				// A shell without job control starts a background
				// command with SIGINT ignored.
				cmd = exec.Command("sh", "-c", `"$0" "$@" & wait`, os.Args[0], "-test.run", "^TestSignals$")
			}
			cmd.Env = append(os.Environ(), "SHUTDOWN_CHILD=1")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			var pid int
			if !lines.Scan() { // the child listens
				t.Fatal("the child said nothing")
			}
			if _, err := fmt.Sscanf(lines.Text(), "ready %d", &pid); err != nil {
				t.Fatalf("child said %q", lines.Text())
			}
			if err := syscall.Kill(pid, tc.send); err != nil {
				t.Fatal(err)
			}
			lines.Scan()
			got := lines.Text() + "\n"
			_, _ = io.Copy(io.Discard, out)
			_ = cmd.Wait()
			if got != tc.wantSaid {
				t.Fatalf("after %s the child said %q (%v); want %q", tc.send, got, cmd.ProcessState, tc.wantSaid)
			}
		})
	}
	if got := shutdown.Signals(); !slices.Contains(got, os.Signal(syscall.SIGTERM)) {
		t.Fatalf("Signals() = %v, lacks SIGTERM", got)
	}
}
