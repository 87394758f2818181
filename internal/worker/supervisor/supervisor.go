// Package supervisor makes a worker's death a clear event. The worker
// command runs its serving process as the child of a small supervisor, the
// same binary: the child tells the supervisor over a pipe which jobs it
// holds (the ledger), and gives it the Go runtime's crash report over
// another (runtime/debug.SetCrashOutput). When the child dies, the
// supervisor knows of what (the signal the Go runtime caught and reported,
// or the wait status when the signal killed it outright, as one raised on
// a thread of the engine's own does) and which jobs it held. It logs that,
// hands it to a report function (the worker writes it into the jobs' run
// records, docs/protocol.md §5, "Crash notes"), and exits with a status
// that names the signal: 128 + its number, as a shell reports it.
package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// childEnv marks the supervised child; its value is "1". The child
// removes it from its environment once attached, so that a process it
// starts is not taken for one.
const childEnv = "GENQ_WORKER_SUPERVISED"

// The child's descriptors of the two pipes (ExtraFiles 0 and 1).
const (
	crashFD  = 3
	ledgerFD = 4
)

// Job is a job the child held.
type Job struct {
	ID string `json:"id"`
	// Seq is the job message's stream sequence.
	Seq uint64 `json:"seq"`
	// Attempt is the delivery, from 1.
	Attempt int `json:"attempt"`
	// Running: the job had started; else it was held, waiting to run.
	Running bool `json:"running,omitempty"`
}

// Ledger is the child's side of the ledger pipe. A nil Ledger (a process
// that is not supervised) records nothing. Its methods are safe for
// concurrent use; a failed write is ignored: the ledger serves a death,
// never the jobs.
type Ledger struct {
	mu sync.Mutex
	w  io.Writer
}

// entry is one line of the ledger.
type entry struct {
	Op string `json:"op"` // held, run or done
	Job
}

// Held records that the process holds j (pulled, not yet running).
func (l *Ledger) Held(j Job) { l.write("held", j) }

// Running records that j started running.
func (l *Ledger) Running(j Job) { j.Running = true; l.write("run", j) }

// Done records that j is settled (or handed back): the process no longer
// holds it.
func (l *Ledger) Done(j Job) { l.write("done", j) }

func (l *Ledger) write(op string, j Job) {
	if l == nil {
		return
	}
	b, err := json.Marshal(entry{Op: op, Job: j})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

// NewLedger returns a ledger that writes to w (tests).
func NewLedger(w io.Writer) *Ledger { return &Ledger{w: w} }

// Attach, in a supervised child, sends the Go runtime's crash report to the
// supervisor as well as to standard error, and returns the ledger. In a
// process that is not supervised it returns nil and does nothing.
func Attach() (*Ledger, error) {
	if os.Getenv(childEnv) != "1" {
		return nil, nil
	}
	if err := os.Unsetenv(childEnv); err != nil {
		return nil, fmt.Errorf("supervised child: %w", err)
	}
	syscall.CloseOnExec(crashFD)
	syscall.CloseOnExec(ledgerFD)
	crash := os.NewFile(crashFD, "crash-report")
	if err := debug.SetCrashOutput(crash, debug.CrashOptions{}); err != nil {
		return nil, fmt.Errorf("supervised child: crash output: %w", err)
	}
	_ = crash.Close() // SetCrashOutput keeps its own copy
	return &Ledger{w: os.NewFile(ledgerFD, "job-ledger")}, nil
}

// Death is how the child ended.
type Death struct {
	PID int
	// Status is what the supervisor exits with: 128 + the signal's number
	// when a signal killed the child, else the child's exit status.
	Status int
	// Signal is the signal that killed it, caught and reported by the Go
	// runtime or read from the wait status; 0 when none did.
	Signal syscall.Signal
	// Cause says what it died of: "SIGILL (illegal instruction)", "a Go
	// panic: …", "exit status 1". Empty for a clean exit.
	Cause string
	// Where says where, as far as the crash report tells: "in C code
	// (llama_decode), raised by the CPU". Empty when unknown.
	Where string
	// Jobs are the jobs the child held when it died.
	Jobs []Job
	// Report is the start of the Go runtime's crash report, if it wrote one.
	Report string
}

// Clean reports whether the child exited with status 0.
func (d Death) Clean() bool { return d.Status == 0 }

// String is the cause and where, in one phrase.
func (d Death) String() string {
	if d.Where == "" {
		return d.Cause
	}
	return d.Cause + " " + d.Where
}

// Options say what child to run and what to do when it dies.
type Options struct {
	// Path, Args (without the program name) and Env are the child's.
	Path string
	Args []string
	Env  []string
	// Log is the supervisor's logger.
	Log *slog.Logger
	// Report, when set, is called when the child died holding jobs, with
	// a context bounded by ReportWithin (default 10 s).
	Report       func(ctx context.Context, d Death) error
	ReportWithin time.Duration
}

// reportKeep bounds what is kept of the crash report; the rest is read and
// dropped, so that a dying child never blocks on a full pipe.
const reportKeep = 64 << 10

// Run starts the child and waits for it to end. When ctx ends (the
// supervisor was asked to stop) the child is sent SIGTERM, and drains. A
// child that dies holding jobs is reported (Options.Report) before Run
// returns. The child is killed with the supervisor (Linux's parent-death
// signal), so a SIGKILL to the supervisor leaves nothing behind.
func Run(ctx context.Context, o Options) (Death, error) {
	crashR, crashW, err := os.Pipe()
	if err != nil {
		return Death{}, fmt.Errorf("supervisor: crash pipe: %w", err)
	}
	defer crashR.Close()
	ledgerR, ledgerW, err := os.Pipe()
	if err != nil {
		crashW.Close()
		return Death{}, fmt.Errorf("supervisor: ledger pipe: %w", err)
	}
	defer ledgerR.Close()

	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env = append(append([]string(nil), o.Env...), childEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{crashW, ledgerW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// child: this one stays locked, and alive, until the child ends.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	err = <-started
	crashW.Close()
	ledgerW.Close()
	if err != nil {
		return Death{}, fmt.Errorf("supervisor: start the worker process: %w", err)
	}
	pid := cmd.Process.Pid
	o.Log.Info("worker process started", "pid", pid)

	var report []byte
	reportDone := make(chan struct{})
	go func() { defer close(reportDone); report = readBounded(crashR, reportKeep) }()
	ledger := newHeld()
	ledgerDone := make(chan struct{})
	go func() { defer close(ledgerDone); ledger.read(ledgerR) }()

	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		o.Log.Info("asking the worker process to stop", "pid", pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		werr = <-waited
	}
	// The pipes end with the child, unless a process it started holds
	// them: then what came so far is what there is.
	for _, done := range []chan struct{}{reportDone, ledgerDone} {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			crashR.Close() // ends the reads
			ledgerR.Close()
			<-done
		}
	}
	d := judge(pid, cmd.ProcessState, report)
	d.Jobs = ledger.jobs()
	if werr != nil && cmd.ProcessState == nil {
		return d, fmt.Errorf("supervisor: wait for the worker process: %w", werr)
	}
	if d.Clean() {
		return d, nil
	}
	if d.Signal == 0 && d.Report == "" && len(d.Jobs) == 0 {
		// An exit of its own (a model it cannot load, say), which it
		// said why.
		o.Log.Info("worker process exited", "pid", pid, "exit_status", d.Status)
		return d, nil
	}
	o.Log.Error("worker process died", "pid", pid, "cause", d.Cause, "where", d.Where, "exit_status", d.Status,
		"jobs_in_flight", d.Jobs, "crash_report", firstLines(d.Report, 4))
	if len(d.Jobs) > 0 && o.Report != nil {
		within := o.ReportWithin
		if within <= 0 {
			within = 10 * time.Second
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
		defer cancel()
		if err := o.Report(rctx, d); err != nil {
			o.Log.Error("could not record the death in the jobs' run records", "err", err)
		}
	}
	return d, nil
}

// readBounded reads r to its end and keeps the first n bytes.
func readBounded(r io.Reader, n int) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, int64(n)))
	_, _ = io.Copy(io.Discard, r)
	return b
}

// held is the set of jobs the ledger says the child holds.
type held struct {
	mu    sync.Mutex
	order []string
	by    map[string]Job
}

func newHeld() *held { return &held{by: map[string]Job{}} }

func (h *held) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		key := fmt.Sprintf("%s/%d/%d", e.ID, e.Seq, e.Attempt)
		h.mu.Lock()
		switch e.Op {
		case "held", "run":
			if _, ok := h.by[key]; !ok {
				h.order = append(h.order, key)
			}
			h.by[key] = e.Job
		case "done":
			delete(h.by, key)
		}
		h.mu.Unlock()
	}
}

func (h *held) jobs() []Job {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Job
	for _, k := range h.order {
		if j, ok := h.by[k]; ok {
			out = append(out, j)
		}
	}
	return out
}

// judge tells what the child died of, from its wait status and the Go
// runtime's crash report (empty when it wrote none: a clean exit, an
// os.Exit, or a signal that killed the process outright).
func judge(pid int, st *os.ProcessState, report []byte) Death {
	d := Death{PID: pid, Report: string(report)}
	if st == nil {
		d.Status, d.Cause = 1, "unknown: the worker process could not be waited for"
		return d
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	status := st.ExitCode()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	// The report, when there is one, names the first cause: with
	// GOTRACEBACK=crash the runtime ends a crash of any kind with SIGABRT.
	switch c := parseReport(d.Report); {
	case c.signal != 0:
		d.Signal, d.Cause, d.Where = c.signal, SignalPhrase(c.signal), c.where
		d.Status = 128 + int(c.signal)
	case c.fatal != "":
		d.Cause, d.Where, d.Status = c.fatal, c.where, status
	case ws.Signaled():
		// Killed outright: the Go runtime did not see it, or passed it
		// on (a signal on a thread Go did not start, such as ggml's).
		d.Signal, d.Cause, d.Status = ws.Signal(), SignalPhrase(ws.Signal()), status
		if d.Signal == syscall.SIGKILL {
			d.Cause += ": the kernel's OOM killer, or kill -9"
		}
	default:
		d.Status = status
		if status != 0 {
			d.Cause = fmt.Sprintf("exit status %d", status)
		}
	}
	return d
}

// SignalPhrase names a signal and says what it means: "SIGILL (illegal
// instruction)".
func SignalPhrase(s syscall.Signal) string {
	name := unix.SignalName(s)
	if name == "" {
		name = fmt.Sprintf("signal %d", int(s))
	}
	return fmt.Sprintf("%s (%s)", name, s.String())
}

// ExitError is returned by a supervisor that should exit with Status,
// having said why.
type ExitError struct{ Status int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Status) }

// Exit is d as an error for the supervisor's main: nil for a clean exit.
func (d Death) Exit() error {
	if d.Clean() {
		return nil
	}
	return ExitError{Status: d.Status}
}

// firstLines returns the first n lines of s that are not empty.
func firstLines(s string, n int) []string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var out []string
	for len(out) < n && sc.Scan() {
		if line := sc.Text(); line != "" {
			out = append(out, line)
		}
	}
	return out
}
