// Package localstack builds genq's binaries and runs them as real processes
// on loopback: nats-server, the api and workers. The black-box tests, the
// chaos scenarios and the benchmarks drive genq through it, the way an
// operator would.
package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the paths of the built programs.
type Binaries struct {
	API, Worker, Genqctl, NATSServer string
}

// Build compiles the three commands and nats-server (from the module genq
// already embeds) into dir. root is the repository root. The Go build cache
// makes a second build cheap.
func Build(ctx context.Context, root, dir string) (Binaries, error) {
	b := Binaries{
		API: filepath.Join(dir, "api"), Worker: filepath.Join(dir, "worker"),
		Genqctl: filepath.Join(dir, "genqctl"), NATSServer: filepath.Join(dir, "nats-server"),
	}
	for out, pkg := range map[string]string{
		b.API: "./cmd/api", b.Worker: "./cmd/worker", b.Genqctl: "./cmd/genqctl", b.NATSServer: "github.com/nats-io/nats-server/v2",
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// RepoRoot finds the repository root above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// FreePort returns a loopback TCP port nobody listens on right now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Proc is a running program whose output goes to a log file.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start runs bin with args and extra environment, logging to logDir/name.log.
// The environment is the caller's minus anything listed in env, plus env.
func Start(name, bin string, args, env []string, logDir string) (*Proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = mergeEnv(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = f, f
	// Pdeathsig: when the harness itself is killed (a timeout, Ctrl-C), its
	// stack goes with it instead of holding ports for the next run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func mergeEnv(base, extra []string) []string {
	override := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		override[k] = true
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !override[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// Kill ends the process with SIGKILL, as the OOM killer or a lost node would.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to grace before killing.
func (p *Proc) Stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s", p.Name, grace)
	}
}

func (p *Proc) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return p.err
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Log returns what the process has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// WaitLog waits until the log contains s.
func (p *Proc) WaitLog(ctx context.Context, s string) error {
	for {
		if strings.Contains(p.Log(), s) {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before logging %q: %v\n%s", p.Name, s, p.err, tail(p.Log(), 2000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not log %q: %w\n%s", p.Name, s, ctx.Err(), tail(p.Log(), 2000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// WaitHTTP waits until url answers 200.
func WaitHTTP(ctx context.Context, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never answered: %w", url, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stack is nats-server, one api and any number of workers of one variant.
type Stack struct {
	Bin      Binaries
	Dir      string // logs, models and NATS storage
	Variant  string
	ModelDir string
	NATSPort int
	APIPort  int
	// APIMetricsPort is the api's internal /metrics port (METRICS_ADDR).
	APIMetricsPort int
	// Env is added to every genq process (the api and the workers).
	Env []string
	// APIEnv is added to the api alone: the settings it owns, such as the
	// queue's, which the workers adopt (docs/configuration.md).
	APIEnv []string
	// NATSArgs are extra nats-server arguments (authentication, say).
	NATSArgs []string
	// Nodes, above 1, makes the stack's NATS a JetStream cluster of that
	// many servers (cluster.go).
	Nodes int
	// BeforeNATSStops, when set, runs in Close once the workers and the
	// api have stopped and NATS has not: what the api left in NATS (a
	// tenant's counters, say) can be read there, settled.
	BeforeNATSStops func()

	// NATSNodes are the cluster's servers, when Nodes is above 1; NATS is
	// the first.
	NATSNodes []*Proc
	nodes     []node

	NATS *Proc
	API  *Proc

	mu      sync.Mutex
	workers []*Proc
	nextID  int
}

// NATSURL is the server's client URL; for a cluster, every node's,
// comma-separated.
func (s *Stack) NATSURL() string {
	if len(s.nodes) == 0 {
		return "nats://127.0.0.1:" + strconv.Itoa(s.NATSPort)
	}
	var urls []string
	for _, n := range s.nodes {
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(n.clientPort))
	}
	return strings.Join(urls, ",")
}

// URL is the api's base URL.
func (s *Stack) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.APIPort) }

// WriteTinyModel writes the variant's tiny model into the stack's model dir.
func (s *Stack) WriteTinyModel(ctx context.Context, extra ...string) error {
	s.ModelDir = filepath.Join(s.Dir, "models", s.Variant)
	args := append([]string{"models", "tiny", "--variant", s.Variant, "--dir", s.ModelDir}, extra...)
	out, err := exec.CommandContext(ctx, s.Bin.Genqctl, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tiny model: %w\n%s", err, out)
	}
	return nil
}

// StartNATS starts nats-server with JetStream, storing under Dir/nats so a
// restart keeps the queue.
func (s *Stack) StartNATS(ctx context.Context) error {
	if s.Nodes > 1 {
		return s.startCluster(ctx)
	}
	if s.NATSPort == 0 {
		p, err := FreePort()
		if err != nil {
			return err
		}
		s.NATSPort = p
	}
	args := append([]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.NATSPort), "-sd", filepath.Join(s.Dir, "nats")}, s.NATSArgs...)
	p, err := Start("nats-server", s.Bin.NATSServer, args, nil, s.Dir)
	if err != nil {
		return err
	}
	s.NATS = p
	return waitTCP(ctx, s.NATSPort)
}

func waitTCP(ctx context.Context, port int) error {
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %d never opened: %w", port, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// MetricsURL is the api's internal /metrics.
func (s *Stack) MetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.APIMetricsPort) + "/metrics"
}

// StartAPI starts the api against the stack's nats-server and waits until
// it serves.
func (s *Stack) StartAPI(ctx context.Context, env ...string) error {
	for _, port := range []*int{&s.APIPort, &s.APIMetricsPort} {
		if *port == 0 {
			p, err := FreePort()
			if err != nil {
				return err
			}
			*port = p
		}
	}
	e := append([]string{"VARIANT=" + s.Variant, "NATS_URL=" + s.NATSURL(), "ADDR=127.0.0.1:" + strconv.Itoa(s.APIPort),
		"METRICS_ADDR=127.0.0.1:" + strconv.Itoa(s.APIMetricsPort)}, s.Env...)
	e = append(e, s.APIEnv...)
	p, err := Start("api", s.Bin.API, nil, append(e, env...), s.Dir)
	if err != nil {
		return err
	}
	s.API = p
	return WaitHTTP(ctx, s.URL()+"/readiness")
}

// StartWorker starts one more worker and, when wait is set, waits until it
// serves.
func (s *Stack) StartWorker(ctx context.Context, wait bool, env ...string) (*Proc, error) {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	name := fmt.Sprintf("worker-%d", id)
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	e := append([]string{"VARIANT=" + s.Variant, "NATS_URL=" + s.NATSURL(), "MODEL_DIR=" + s.ModelDir,
		"WORKER_ID=" + name, "METRICS_ADDR=127.0.0.1:" + strconv.Itoa(metricsPort)}, s.Env...)
	p, err := Start(name, s.Bin.Worker, nil, append(e, env...), s.Dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.workers = append(s.workers, p)
	s.mu.Unlock()
	if wait {
		// A worker that never gets ready must fail the caller, not hang it.
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := p.WaitLog(ctx, `"msg":"worker ready"`); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Workers returns every worker started so far, dead or alive.
func (s *Stack) Workers() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Proc(nil), s.workers...)
}

// Close stops every process, workers first.
func (s *Stack) Close() {
	for _, w := range s.Workers() {
		if !w.Exited() {
			_ = w.Stop(10 * time.Second)
		}
	}
	if s.API != nil && !s.API.Exited() {
		_ = s.API.Stop(10 * time.Second)
	}
	if s.BeforeNATSStops != nil {
		s.BeforeNATSStops()
	}
	nats := s.NATSNodes
	if len(nats) == 0 {
		nats = []*Proc{s.NATS}
	}
	for _, n := range nats {
		if n != nil && !n.Exited() {
			_ = syscall.Kill(n.PID(), syscall.SIGCONT) // a frozen node cannot stop
			_ = n.Stop(10 * time.Second)
		}
	}
}

// Logs returns every process's log, concatenated.
func (s *Stack) Logs() string {
	var b bytes.Buffer
	for _, p := range append(append([]*Proc{s.NATS, s.API}, s.NATSNodes...), s.Workers()...) {
		if p != nil {
			b.WriteString(p.Log())
		}
	}
	return b.String()
}
