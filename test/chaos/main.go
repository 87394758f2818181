// Command chaos runs genq's fault scenarios over real processes on
// loopback (nats-server, the api, workers) and prints a table of figures:
// requests sent, answered, clean errors by status, lost, duplicated, and
// latency. Every scenario is bounded in requests and time. `make chaos`
// runs it and rewrites the figures in docs/reliability.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// common settings of every scenario: short ack wait and heartbeat TTL, so
// recovery fits in a bounded run.
var commonEnv = []string{"JOB_ACK_WAIT=3s", "HEARTBEAT_TTL=4s", "GENERATE_TIMEOUT=60s", "RETRY_DELAY=200ms", "LOG_LEVEL=info"}

type env struct {
	bin  localstack.Binaries
	root string
	work string
	out  io.Writer
	// ten is the scenario's tenants (tenancy.go), client what sends its
	// requests as them.
	ten    *tenancy
	client *http.Client
}

type scenario struct {
	name string
	run  func(ctx context.Context, e env) (localstack.Report, error)
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	only := fs.String("run", "", "regular expression of the scenarios to run")
	report := fs.String("report", "", "Markdown file whose figures section to rewrite")
	cluster := fs.Bool("cluster", false, "run the scenarios of a 3-node NATS cluster instead (their own figures section)")
	keep := fs.Bool("keep", false, "keep the processes' logs and storage (their folder is printed)")
	keys := fs.Bool("keys", true, "run with two tenants' keys and limits, and check their counters after each scenario; false to compare without")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := localstack.RepoRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "genq-chaos-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(out, "keeping logs in", work)
	} else {
		defer os.RemoveAll(work)
	}
	fmt.Fprintln(out, "building binaries…")
	bin, err := localstack.Build(ctx, root, filepath.Join(work, "bin"))
	if err != nil {
		return err
	}
	keysFile := ""
	if *keys {
		if keysFile, err = writeKeysFile(work); err != nil {
			return err
		}
	}
	e := env{bin: bin, root: root, work: work, out: out}
	scenarios := []scenario{
		{"worker SIGKILL mid-job under load", sigkillMidJob},
		{"worker SIGKILL with 8 streams open", streamSIGKILL},
		{"NATS restarted under load", natsRestart},
		{"client disconnects mid-generation", clientDisconnect},
		{"burst of 10x capacity", burst},
		{"large PNGs, concurrent, slow reader", largePNGs},
		{"ggml image engine: worker SIGKILL mid-image", ggmlImageSIGKILL},
		{"poison job that crashes its workers", poisonJob},
		{"poison job beside healthy jobs on one worker", poisonBeside},
		{"catalogue: a model file that is corrupt", corruptModel},
		{"catalogue: worker SIGKILL while it loads a model", killWhileLoading},
		{"catalogue: a budget too small for any model", budgetTooSmall},
		{"scale from zero", scaleFromZero},
		{"slow NATS link: settling outlasts the ack wait", slowLink},
		{"NATS down past the publish bound", natsDown},
		{"interrupted batch, rerun", batchRerun},
		{"Batch API: the accepting api SIGKILL mid-batch", batchAPIKilled},
		{"Batch API: worker SIGKILL mid-batch", batchWorkerKilled},
		{"Batch API: NATS restarted mid-batch", batchNATSRestart},
		{"api SIGTERM with requests waiting", apiShutdown},
		{"routed: conversations under load on 2 workers", keyless(routedTurns)},
		{"routed: preferred worker SIGKILL mid-job", keyless(routedSigkillMidJob)},
		{"routed: preferred worker SIGKILL holding routed jobs", keyless(routedSigkillHolding)},
		{"routed: preferred worker frozen past the steal bound", keyless(routedFreeze)},
	}
	section := "chaos"
	if *cluster {
		scenarios, section = clusterScenarios, "chaos-cluster"
	}
	var filter *regexp.Regexp
	if *only != "" {
		if filter, err = regexp.Compile(*only); err != nil {
			return err
		}
	}
	var reports []localstack.Report
	failed := false
	start, loadStart := time.Now(), loadAverage()
	for _, sc := range scenarios {
		if filter != nil && !filter.MatchString(sc.name) {
			continue
		}
		fmt.Fprintf(out, "scenario: %s\n", sc.name)
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		t0 := time.Now()
		se := e
		se.ten = newTenancy(keysFile)
		se.client = se.ten.client()
		rep, err := sc.run(sctx, se)
		cancel()
		rep.Scenario = sc.name
		note, cerr := se.ten.result()
		if note != "" {
			rep.Notes = append(rep.Notes, note)
		}
		if err == nil {
			err = cerr
		}
		if err != nil {
			failed = true
			rep.Notes = append(rep.Notes, "FAILED: "+err.Error())
		} else if rep.Lost > 0 || rep.Duplicated > 0 {
			failed = true
			rep.Notes = append(rep.Notes, "FAILED: lost or duplicated requests")
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("took %s", time.Since(t0).Round(time.Second)))
		reports = append(reports, rep)
		fmt.Fprintf(out, "  %+v\n", rep)
	}
	table := localstack.Table(reports)
	fmt.Fprintf(out, "\n%s\nall scenarios in %s\n", table, time.Since(start).Round(time.Second))
	if *report != "" {
		if err := writeReport(*report, section, table, time.Since(start), loadStart, *keys); err != nil {
			return err
		}
	}
	if failed {
		return errors.New("a scenario failed")
	}
	return nil
}

// newStack starts nats-server, the api for variant and the given number of
// workers, ready before it returns; more are up to the scenario. extra is
// the environment of every process.
func newStack(ctx context.Context, e env, name, variant string, workers int, extra ...string) (*localstack.Stack, error) {
	dir := filepath.Join(e.work, strings.NewReplacer(" ", "-", "/", "-").Replace(name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startStack(ctx, e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: variant, Env: append(append([]string{}, commonEnv...), extra...)}), workers)
}

// startStack writes s's tiny model and starts its NATS, its api and the
// given number of workers, each ready before the next; on a failure it
// stops what it started.
func startStack(ctx context.Context, s *localstack.Stack, workers int, modelArgs ...string) (*localstack.Stack, error) {
	err := s.WriteTinyModel(ctx, modelArgs...)
	if err == nil {
		err = s.StartNATS(ctx)
	}
	if err == nil {
		err = s.StartAPI(ctx)
	}
	for range workers {
		if err == nil {
			_, err = s.StartWorker(ctx, true)
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func texts(n int, prefix string) []localstack.Request {
	reqs := make([]localstack.Request, n)
	for i := range reqs {
		reqs[i] = localstack.Request{Text: fmt.Sprintf("%s %d: tell me about queues", prefix, i)}
	}
	return reqs
}

func workerLogs(s *localstack.Stack) string {
	var b strings.Builder
	for _, w := range s.Workers() {
		b.WriteString(w.Log())
	}
	return b.String()
}

// sigkillMidJob: steady load on two workers; one is killed with SIGKILL
// mid-job, and a replacement starts two seconds later, as Kubernetes would.
func sigkillMidJob(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "sigkill", "B", 2)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	killAndReplace(ctx, s, `"msg":"job started"`, 300*time.Millisecond)
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(80, "sigkill"), 8, 90*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	rep.Notes = append(rep.Notes, "1 of 2 workers killed once jobs ran; ack wait 3s")
	return rep, nil
}

// killAndReplace kills the stack's first worker with SIGKILL once a line
// of its log matches busy and after more, and starts a replacement two
// seconds later, as Kubernetes would.
func killAndReplace(ctx context.Context, s *localstack.Stack, busy string, after time.Duration) {
	victim := s.Workers()[0]
	go func() {
		_ = victim.WaitLog(ctx, busy)
		time.Sleep(after)
		victim.Kill()
		time.Sleep(2 * time.Second)
		_, _ = s.StartWorker(ctx, false)
	}()
}

// natsRestart: the nats-server is stopped under load and started again two
// seconds later on the same storage; the api and the workers reconnect.
func natsRestart(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "nats-restart", "B", 2)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_ = s.NATS.Stop(10 * time.Second)
		time.Sleep(2 * time.Second)
		restarted <- s.StartNATS(ctx)
	}()
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(80, "restart"), 8, 90*time.Second)
	if err := <-restarted; err != nil {
		return localstack.Report{}, err
	}
	// After the restart, the stack serves again.
	after := localstack.Fire(ctx, e.client, s.URL(), texts(8, "after"), 4, 60*time.Second)
	rep := localstack.Summarize("", append(outs, after...), workerLogs(s))
	okAfter := 0
	for _, o := range after {
		if o.Status == http.StatusOK {
			okAfter++
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("nats down 2s; %d/%d ok after it came back", okAfter, len(after)))
	if okAfter != len(after) {
		return rep, errors.New("the stack did not recover after NATS came back")
	}
	return rep, nil
}

var (
	logTime  = regexp.MustCompile(`"time":"([^"]+)"`)
	logJobID = regexp.MustCompile(`"job_id":"([^"]+)"`)
)

// jobIDOf is the job id a worker's log line is about, or "".
func jobIDOf(line string) string {
	if m := logJobID.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// clientDisconnect: a client gives up mid-generation; the job must stop and
// its slot be free within a second, so the next request starts at once.
func clientDisconnect(ctx context.Context, e env) (localstack.Report, error) {
	// A long answer: the tiny model decodes thousands of tokens a second,
	// so only a full 4096-token context, with end-of-turn ignored, keeps
	// it busy long enough to be abandoned mid-answer.
	s, err := newStack(ctx, e, "disconnect", "B", 1, "TEXT_CONTEXT_SIZE=4096", "TEXT_MAX_NEW_TOKENS=4000", "TEXT_IGNORE_EOS=true", "SLOTS=1")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	w := s.Workers()[0]
	var outs []localstack.Outcome
	var freed []time.Duration
	for i := range 5 {
		cctx, cancel := context.WithCancel(ctx)
		started := strings.Count(w.Log(), `"msg":"job started"`)
		go func() {
			for strings.Count(w.Log(), `"msg":"job started"`) == started && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			cancel()
		}()
		before := strings.Count(w.Log(), "job cancelled by its caller while running")
		o := localstack.Generate(cctx, e.client, s.URL(), localstack.Request{Text: fmt.Sprintf("long answer %d", i)}, time.Minute)
		cancelledAt := time.Now()
		if o.Status != 0 {
			return localstack.Report{}, fmt.Errorf("the abandoned request was answered %d", o.Status)
		}
		// The next request must start at once on the only slot.
		next := localstack.Generate(ctx, e.client, s.URL(), localstack.Request{Text: "short"}, time.Minute)
		outs = append(outs, next)
		deadline := time.Now().Add(3 * time.Second)
		for strings.Count(w.Log(), "job cancelled by its caller while running") == before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		lines := strings.Split(w.Log(), "\n")
		for j := len(lines) - 1; j >= 0; j-- {
			if strings.Contains(lines[j], "job cancelled by its caller while running") {
				if m := logTime.FindStringSubmatch(lines[j]); m != nil {
					at, _ := time.Parse(time.RFC3339Nano, m[1])
					freed = append(freed, at.Sub(cancelledAt))
				}
				break
			}
		}
	}
	rep := localstack.Summarize("", outs, workerLogs(s))
	worst := time.Duration(0)
	for _, f := range freed {
		worst = max(worst, f)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("5 clients left mid-answer; slot freed at worst %s after the disconnect (%d measured)", worst.Round(time.Millisecond), len(freed)))
	if len(freed) != 5 || worst > time.Second {
		return rep, fmt.Errorf("slots freed %v", freed)
	}
	return rep, nil
}

// burst: ten times what the queue holds, all at once.
func burst(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "burst", "B", 1, "QUEUE_CAPACITY=8", "SLOTS=4")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	w := s.Workers()[0]
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(80, "burst"), 80, 60*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	for _, o := range outs {
		if o.Status == http.StatusTooManyRequests && o.Header.Get("Retry-After") == "" {
			return rep, errors.New("a 429 without Retry-After")
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("capacity 8 (queued + running); peak RSS api %.0f MiB, worker %.0f MiB", procfs.PeakRSSMiB(s.API.PID()), procfs.PeakRSSMiB(w.PID())))
	if rep.Errors["429"] == 0 || rep.OK == 0 {
		return rep, errors.New("a burst should see both 200s and 429s")
	}
	return rep, nil
}

// largePNGs: images over 1 MB through NATS at its default max_payload, four
// at a time, read by a client that takes its time.
func largePNGs(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "large-png", "C", 2, "IMAGE_WIDTH=768", "IMAGE_HEIGHT=768", "IMAGE_STEPS=4")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	slow := func(r io.Reader) ([]byte, error) {
		var b bytes.Buffer
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err == io.EOF {
				return b.Bytes(), nil
			}
			if err != nil {
				return b.Bytes(), err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reqs := texts(12, "a red fox")
	for i := range reqs {
		reqs[i].Read = slow
	}
	outs := localstack.Fire(ctx, e.client, s.URL(), reqs, 4, 90*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	smallest := 1 << 40
	for _, o := range outs {
		if o.Status != http.StatusOK {
			continue
		}
		if !bytes.HasPrefix(o.Body, []byte("\x89PNG\r\n\x1a\n")) || o.Header.Get("Content-Type") != "image/png" {
			return rep, errors.New("an answer is not a PNG")
		}
		smallest = min(smallest, len(o.Body))
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("768x768, smallest PNG %d bytes (NATS max_payload 1 MB)", smallest))
	if smallest <= 1<<20 {
		return rep, errors.New("the PNGs were not larger than 1 MB")
	}
	return rep, nil
}

// ggmlImageSIGKILL: images on the ggml engine (the tiny model's GGUF files,
// IMAGE_ENGINE=ggml) on two workers; one is killed with SIGKILL mid-image
// and a replacement starts two seconds later.
func ggmlImageSIGKILL(ctx context.Context, e env) (localstack.Report, error) {
	dir := filepath.Join(e.work, "ggml-image-sigkill")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return localstack.Report{}, err
	}
	env := append(append([]string{}, commonEnv...), "IMAGE_ENGINE=ggml", "IMAGE_WIDTH=256", "IMAGE_HEIGHT=256", "IMAGE_STEPS=8", "IMAGE_THREADS=1")
	s, err := startStack(ctx, e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: "C", Env: env}), 2, "--engine", "ggml")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	killAndReplace(ctx, s, `"msg":"job started"`, 50*time.Millisecond)
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(16, "a lighthouse"), 4, 90*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	for _, o := range outs {
		if o.Status == http.StatusOK && !bytes.HasPrefix(o.Body, []byte("\x89PNG\r\n\x1a\n")) {
			return rep, errors.New("an answer is not a PNG")
		}
	}
	rep.Notes = append(rep.Notes, "256x256, 8 steps on the ggml engine; 1 of 2 workers killed once an image ran; ack wait 3s")
	return rep, nil
}

// scaleFromZero: requests arrive with no worker; one starts 5 s later.
func scaleFromZero(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "scale-from-zero", "B", 0)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	go func() {
		time.Sleep(5 * time.Second)
		_, _ = s.StartWorker(ctx, false)
	}()
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(20, "cold"), 20, 60*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	rep.Notes = append(rep.Notes, "worker started 5s after the requests")
	return rep, nil
}

// slowLink: one worker reaches NATS through a link that holds every byte
// back 500 ms each way, so replying, storing and acking a result takes
// longer than the ack wait of 3 s. The job must stay with that worker until
// it is acked, not be run a second time by the other worker.
func slowLink(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "slow-link", "B", 0, "SLOTS=2")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	proxy, err := localstack.NewProxy(fmt.Sprintf("127.0.0.1:%d", s.NATSPort), 500*time.Millisecond)
	if err != nil {
		return localstack.Report{}, err
	}
	defer proxy.Close()
	slow, err := s.StartWorker(ctx, true, "NATS_URL="+proxy.URL())
	if err != nil {
		return localstack.Report{}, err
	}
	// The other worker starts once the slow one holds results: it pulls
	// faster, and would otherwise take every job.
	go func() {
		if slow.WaitLog(ctx, `"msg":"job generated"`) == nil {
			_, _ = s.StartWorker(ctx, false)
		}
	}()
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(16, "slow link"), 4, 90*time.Second)
	// The answers are out, but the slow worker is still storing and acking;
	// a job it let fall silent would now run again on the other worker.
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l := slow.Log(); strings.Count(l, `"msg":"job done"`) >= strings.Count(l, `"msg":"job generated"`) {
			break
		}
	}
	time.Sleep(4 * time.Second) // past the ack wait
	rep := localstack.Summarize("", outs, workerLogs(s))
	settled, longest := 0, time.Duration(0)
	generatedAt := map[string]time.Time{}
	for _, line := range strings.Split(slow.Log(), "\n") {
		m, id := logTime.FindStringSubmatch(line), jobIDOf(line)
		if m == nil || id == "" {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, m[1])
		switch {
		case strings.Contains(line, `"msg":"job generated"`):
			generatedAt[id] = at
		case strings.Contains(line, `"msg":"job done"`) && !generatedAt[id].IsZero():
			settled++
			longest = max(longest, at.Sub(generatedAt[id]))
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("one of 2 workers behind a 500 ms each-way link; it settled %d jobs, the slowest %s after its result (ack wait 3s)", settled, longest.Round(100*time.Millisecond)))
	if settled == 0 || longest < 3*time.Second {
		return rep, errors.New("the slow worker settled no job, or settled it within the ack wait")
	}
	return rep, nil
}

// neverRan checks that none of ids was run by a worker.
func neverRan(logs string, ids []string) error {
	for _, id := range ids {
		if id != "" && strings.Contains(logs, `"msg":"job started"`) && regexp.MustCompile(`"msg":"job started"[^\n]*"job_id":"`+regexp.QuoteMeta(id)+`"`).MatchString(logs) {
			return fmt.Errorf("job %s ran after its caller was answered", id)
		}
	}
	return nil
}

// natsDown: requests sent while NATS is down get 503 with Retry-After once
// the api's publish bound (10 s) passes, not at their 60 s deadline; their
// jobs, which the server may have taken, are cancelled and never run once
// NATS is back, and the stack serves again.
func natsDown(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "nats-down", "B", 1)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	_ = s.NATS.Stop(10 * time.Second)
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(4, "nats down"), 4, 90*time.Second)
	if err := s.StartNATS(ctx); err != nil {
		return localstack.Report{}, err
	}
	after := localstack.Fire(ctx, e.client, s.URL(), texts(8, "back"), 4, 60*time.Second)
	time.Sleep(4 * time.Second) // time for a job that slipped through to run
	rep := localstack.Summarize("", append(outs, after...), workerLogs(s))
	var ids []string
	slowest := time.Duration(0)
	for _, o := range outs {
		if o.Status != http.StatusServiceUnavailable || o.Header.Get("Retry-After") == "" {
			return rep, fmt.Errorf("a request while NATS was down got %d %s, want 503 with Retry-After", o.Status, o.Body)
		}
		ids = append(ids, o.JobID)
		slowest = max(slowest, o.Latency)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("NATS stopped; 4 requests answered 503 with Retry-After after at most %s (deadline 60s); none of their jobs ran after NATS came back", slowest.Round(100*time.Millisecond)))
	if slowest > 20*time.Second {
		return rep, errors.New("a 503 waited past the publish bound")
	}
	for _, o := range after {
		if o.Status != http.StatusOK {
			return rep, errors.New("the stack did not serve after NATS came back")
		}
	}
	return rep, neverRan(workerLogs(s), ids)
}

// batchRerun: genqctl submit is interrupted (SIGINT) while its jobs wait in
// the queue, which cancels them; the same command run again finishes the
// batch promptly, every job once.
func batchRerun(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-rerun", "B", 0)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	dir := filepath.Join(s.Dir, "batch")
	_ = os.MkdirAll(dir, 0o755)
	in := filepath.Join(dir, "in.jsonl")
	var lines strings.Builder
	const n = 12
	for i := range n {
		fmt.Fprintf(&lines, `{"text":"batch line %d"}`+"\n", i)
	}
	_ = os.WriteFile(in, []byte(lines.String()), 0o644)
	submit := func(ctx context.Context) *exec.Cmd {
		c := exec.CommandContext(ctx, s.Bin.Genqctl, "submit", "--variant", "B", "--in", in, "--out", dir, "--timeout", "45s")
		c.Env = append(os.Environ(), "NATS_URL="+s.NATSURL())
		return c
	}
	first := submit(ctx)
	if err := first.Start(); err != nil {
		return localstack.Report{}, err
	}
	time.Sleep(2 * time.Second) // every job queued, no worker to run them
	_ = first.Process.Signal(os.Interrupt)
	_ = first.Wait()
	if _, err := s.StartWorker(ctx, true); err != nil {
		return localstack.Report{}, err
	}
	t0 := time.Now()
	out, err := submit(ctx).CombinedOutput()
	took := time.Since(t0)
	results, _ := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	ok := bytes.Count(results, []byte(`"generated_text"`))
	rep := localstack.Summarize("", nil, workerLogs(s))
	rep.Sent, rep.OK, rep.Lost = n, ok, n-ok
	rep.Notes = append(rep.Notes, fmt.Sprintf("first run interrupted with every job queued; the rerun finished %d/%d in %s (job timeout 45s), %d results lines", ok, n, took.Round(100*time.Millisecond), bytes.Count(results, []byte("\n"))))
	if err != nil || ok != n {
		return rep, fmt.Errorf("the rerun did not finish the batch: %v\n%s", err, out)
	}
	return rep, nil
}

// apiShutdown: the api gets SIGTERM while requests wait for a worker that
// does not come within its shutdown grace (2 s). They get 503 with
// Retry-After, and their jobs are cancelled: the worker that starts later
// does not run them.
func apiShutdown(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "api-shutdown", "B", 0, "SHUTDOWN_GRACE=2s")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	go func() {
		time.Sleep(time.Second)
		_ = s.API.Stop(20 * time.Second)
	}()
	outs := localstack.Fire(ctx, e.client, s.URL(), texts(6, "shutdown"), 6, 30*time.Second)
	if _, err := s.StartWorker(ctx, true); err != nil {
		return localstack.Report{}, err
	}
	time.Sleep(4 * time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	var ids []string
	for _, o := range outs {
		if o.Status != http.StatusServiceUnavailable || o.Header.Get("Retry-After") == "" {
			return rep, fmt.Errorf("a request waiting at shutdown got %d %s, want 503 with Retry-After", o.Status, o.Body)
		}
		ids = append(ids, o.JobID)
	}
	rep.Notes = append(rep.Notes, "api stopped 1s after 6 requests with no worker (grace 2s); all 503 with Retry-After; a worker started afterwards ran none of their jobs")
	return rep, neverRan(workerLogs(s), ids)
}

// writeReport replaces the figures between the markers in path.
func writeReport(path, section, table string, took time.Duration, loadStart string, keys bool) error {
	tenants := "Tenants and limits off (`--keys=false`)."
	if keys {
		tenants = "Tenants and limits on: two tenants' keys in `API_KEYS_FILE` (weights 1:3; rpm, tpm, tpd and concurrency far above the load), every request sent with one of them, the tenants in turn; after each scenario their counters were checked against what the api admitted."
	}
	body := fmt.Sprintf("Last run: %s, %d cores (%s), load average %s at the start and %s at the end (the machine is shared), %s in all. %s\n\n%s",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), procfs.CPUName(), loadStart, loadAverage(), took.Round(time.Second), tenants, table)
	return localstack.ReplaceSection(path, "<!-- "+section+":begin -->", "<!-- "+section+":end -->", body)
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg says, or "?": the figures of a busy machine are slower.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
