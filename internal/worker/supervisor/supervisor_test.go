package supervisor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/genq/genq/internal/worker/supervisor"
)

// The test binary is also the supervised child: TestMain runs the child's
// part when childMode is set.
const childMode = "SUPERVISOR_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childMode); mode != "" {
		child(mode)
		return
	}
	os.Exit(m.Run())
}

// child holds jobs as a worker would, says it is ready by writing its pid
// to $READY, and then ends as mode says.
func child(mode string) {
	// No core files in the package's folder, whatever the shell allows.
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	l, err := supervisor.Attach()
	if err != nil || l == nil {
		fmt.Fprintln(os.Stderr, "not supervised:", err)
		os.Exit(3)
	}
	running := supervisor.Job{ID: "job-running", Seq: 7, Attempt: 2}
	waiting := supervisor.Job{ID: "job-waiting", Seq: 8, Attempt: 1}
	settled := supervisor.Job{ID: "job-settled", Seq: 9, Attempt: 1}
	for _, j := range []supervisor.Job{running, waiting, settled} {
		l.Held(j)
	}
	l.Running(running)
	l.Running(settled)
	l.Done(settled)
	if mode == "clean" {
		l.Done(running)
		l.Done(waiting)
	}
	_ = os.WriteFile(os.Getenv("READY"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	switch mode {
	case "clean":
		os.Exit(0)
	case "exit1":
		os.Exit(1)
	case "panic":
		panic("the engine's state is corrupt")
	case "kill-self":
		_ = syscall.Kill(os.Getpid(), syscall.SIGILL)
	}
	// Wait for a signal from outside; SIGTERM asks to drain.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	<-term
	l.Done(running)
	l.Done(waiting)
	os.Exit(0)
}

// heldAtDeath are the jobs the child holds when it dies.
var heldAtDeath = []supervisor.Job{{ID: "job-running", Seq: 7, Attempt: 2, Running: true}, {ID: "job-waiting", Seq: 8, Attempt: 1}}

// TestRun runs a real child process per way of dying, real signals
// included, and checks what the supervisor makes of it.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode string
		env  string         // more of the child's environment
		send syscall.Signal // sent from outside once the child is ready; 0: none
		stop bool           // the supervisor is asked to stop
		// want
		status   int
		signal   syscall.Signal
		cause    string
		where    string // a part of Where
		reported bool
	}{
		{name: "clean exit", mode: "clean"},
		{name: "drained on SIGTERM", mode: "wait", stop: true},
		{name: "SIGILL sent with kill", mode: "wait", send: syscall.SIGILL, status: 132, signal: syscall.SIGILL,
			cause: "SIGILL (illegal instruction)", where: "sent by another process", reported: true},
		{name: "SIGSEGV sent with kill", mode: "wait", send: syscall.SIGSEGV, status: 139, signal: syscall.SIGSEGV,
			cause: "SIGSEGV (segmentation fault)", where: "sent by another process", reported: true},
		{name: "SIGABRT sent with kill", mode: "wait", send: syscall.SIGABRT, status: 134, signal: syscall.SIGABRT,
			cause: "SIGABRT (aborted)", reported: true},
		{name: "SIGKILL", mode: "wait", send: syscall.SIGKILL, status: 137, signal: syscall.SIGKILL,
			cause: "SIGKILL (killed): the kernel's OOM killer, or kill -9", reported: true},
		{name: "SIGILL raised by itself", mode: "kill-self", status: 132, signal: syscall.SIGILL,
			cause: "SIGILL (illegal instruction)", reported: true},
		{name: "SIGILL raised by itself, GOTRACEBACK=crash", mode: "kill-self", env: "GOTRACEBACK=crash", status: 132,
			signal: syscall.SIGILL, cause: "SIGILL (illegal instruction)", reported: true},
		{name: "a Go panic, GOTRACEBACK=crash", mode: "panic", env: "GOTRACEBACK=crash", status: 134,
			cause: "a Go panic: the engine's state is corrupt", reported: true},
		{name: "a Go panic", mode: "panic", status: 2, cause: "a Go panic: the engine's state is corrupt", where: "supervisor_test.child", reported: true},
		{name: "exit status 1", mode: "exit1", status: 1, cause: "exit status 1", reported: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ready := filepath.Join(t.TempDir(), "ready")
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			var reports []supervisor.Death
			env := append(os.Environ(), childMode+"="+tc.mode, "READY="+ready)
			if tc.env != "" {
				env = append(env, tc.env)
			}
			o := supervisor.Options{
				Path: os.Args[0], Args: []string{"-test.run", "^$"}, Env: env,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Report: func(ctx context.Context, d supervisor.Death) error {
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the report's context has no bound")
					}
					reports = append(reports, d)
					return nil
				},
			}
			if tc.send != 0 || tc.stop {
				go func() {
					pid := waitReady(t, ready)
					if pid <= 0 {
						return // never -1: kill(-1) signals every process
					}
					if tc.stop {
						stop()
						return
					}
					_ = syscall.Kill(pid, tc.send)
				}()
			}
			d, err := supervisor.Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != tc.status || d.Signal != tc.signal || d.Cause != tc.cause {
				t.Errorf("died with status %d, signal %v, cause %q; want %d, %v, %q (report:\n%s)",
					d.Status, d.Signal, d.Cause, tc.status, tc.signal, tc.cause, d.Report)
			}
			if !strings.Contains(d.Where, tc.where) {
				t.Errorf("where %q, want it to hold %q", d.Where, tc.where)
			}
			if d.Clean() != (tc.status == 0) || (d.Exit() == nil) != (tc.status == 0) {
				t.Errorf("clean %v, exit %v, for status %d", d.Clean(), d.Exit(), d.Status)
			}
			if !tc.reported {
				if len(reports) != 0 {
					t.Errorf("reported %+v; want no report", reports)
				}
				return
			}
			if len(reports) != 1 || !slices.Equal(reports[0].Jobs, heldAtDeath) {
				t.Fatalf("reported %+v; want one report of the jobs %+v", reports, heldAtDeath)
			}
		})
	}
}

func waitReady(t *testing.T, path string) int {
	for range 500 {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err == nil {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the child never got ready")
	return 0
}
