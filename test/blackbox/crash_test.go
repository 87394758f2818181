package blackbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/test/localstack"
)

// TestEngineCrashIsNamed plays the engine crash of issue 50 (ggml's AMX
// kernels raised SIGILL inside llama_decode) with a real SIGILL sent to the
// real worker process while it runs a job, twice, the second time to the
// worker that ran the job alone. With one attempt (JOB_MAX_ATTEMPTS=1) the
// third worker dead-letters the job. Checked: each supervisor names the
// signal and the job it held; the job is redelivered, and dead-lettered
// with a reason that names the signal; its caller gets a clean 500, not a
// hang; it never ran to an answer.
func TestEngineCrashIsNamed(t *testing.T) {
	s := newStack(t, "JOB_ACK_WAIT=2s", "HEARTBEAT_TTL=4s", "RETRY_DELAY=200ms", "LOG_LEVEL=info", "GENERATE_TIMEOUT=90s",
		"JOB_MAX_ATTEMPTS=1", "TEXT_CONTEXT_SIZE=4096", "TEXT_MAX_NEW_TOKENS=4000", "TEXT_IGNORE_EOS=true")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if err := s.StartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := s.StartWorker(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan localstack.Outcome, 1)
	go func() {
		answer <- localstack.Generate(ctx, http.DefaultClient, s.URL(), localstack.Request{Text: "the poison"}, 2*time.Minute)
	}()

	// The first worker runs the job; SIGILL kills it mid-run.
	jobID := crashOnStart(ctx, t, first, "")
	if t.Failed() {
		return
	}
	// The second gets it again, knows why it came back, runs it alone, and
	// dies the same way.
	second, err := s.StartWorker(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	crashOnStart(ctx, t, second, jobID)
	if t.Failed() {
		return
	}
	if !strings.Contains(second.Log(), `"msg":"the job's previous delivery died with its worker"`) ||
		!strings.Contains(second.Log(), "died of SIGILL (illegal instruction)") {
		t.Errorf("the second worker did not log what the first died of:\n%s", tailString(second.Log(), 4000))
	}
	// The third finds its one attempt used (a crash while alone) and
	// dead-letters it.
	third, err := s.StartWorker(ctx, true)
	if err != nil {
		t.Fatal(err)
	}

	var o localstack.Outcome
	select {
	case o = <-answer:
	case <-ctx.Done():
		t.Fatal("the caller got no answer: it hangs")
	}
	var body struct{ Error string }
	_ = json.Unmarshal(o.Body, &body)
	if o.Status != http.StatusInternalServerError || !strings.Contains(body.Error, "SIGILL (illegal instruction)") {
		t.Errorf("the caller got %d %s (%v); want 500 naming SIGILL", o.Status, o.Body, o.Err)
	}
	dead, err := lastDeadLetter(ctx, s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	reason := dead.Get("Genq-Error")
	if dead.Get(natsqueue.HeaderJobID) != jobID || !strings.Contains(reason, "died of SIGILL (illegal instruction)") ||
		!strings.Contains(reason, second.Name) {
		t.Errorf("dead letter of job %q with reason %q; want job %q, its reason naming SIGILL and %s",
			dead.Get(natsqueue.HeaderJobID), reason, jobID, second.Name)
	}
	t.Logf("the dead letter's reason: %s", reason)

	logs := first.Log() + second.Log() + third.Log()
	started := regexp.MustCompile(`"msg":"job started"[^\n]*"job_id":"` + regexp.QuoteMeta(jobID) + `"`)
	answered := regexp.MustCompile(`"msg":"job generated"[^\n]*"job_id":"` + regexp.QuoteMeta(jobID) + `"`)
	if n, m := len(started.FindAllString(logs, -1)), len(answered.FindAllString(logs, -1)); n != 2 || m != 0 {
		t.Errorf("the job started %d times and ran to an answer %d times; want 2 starts, both killed, and no answer", n, m)
	}
}

// crashOnStart waits until w starts a job (jobID, or any when empty),
// sends its worker process SIGILL, waits for the worker to end, and checks
// that its supervisor said what it died of and what it was running. It
// returns the job's id.
func crashOnStart(ctx context.Context, t *testing.T, w *localstack.Proc, jobID string) string {
	t.Helper()
	started := regexp.MustCompile(`"msg":"job started"[^\n]*"job_id":"([^"]+)"`)
	if jobID != "" {
		started = regexp.MustCompile(`"msg":"job started"[^\n]*"job_id":"(` + regexp.QuoteMeta(jobID) + `)"`)
	}
	for {
		if m := started.FindStringSubmatch(w.Log()); m != nil {
			jobID = m[1]
			break
		}
		if w.Exited() || ctx.Err() != nil {
			t.Fatalf("%s started no job:\n%s", w.Name, tailString(w.Log(), 4000))
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid := childPID(t, w)
	if err := syscall.Kill(pid, syscall.SIGILL); err != nil {
		t.Fatalf("SIGILL to %s's worker process %d: %v", w.Name, pid, err)
	}
	for !w.Exited() {
		if ctx.Err() != nil {
			t.Fatalf("%s's supervisor did not end after its worker process died:\n%s", w.Name, tailString(w.Log(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	died := regexp.MustCompile(`"msg":"worker process died"[^\n]*`).FindString(w.Log())
	t.Logf("%s's supervisor: %s", w.Name, died)
	for _, want := range []string{
		`"pid":` + strconv.Itoa(pid), `"cause":"SIGILL (illegal instruction)"`, `"exit_status":132`,
		fmt.Sprintf(`{"id":%q,`, jobID), `"running":true`,
	} {
		if !strings.Contains(died, want) {
			t.Errorf("%s's supervisor said %q; want it to hold %s", w.Name, died, want)
		}
	}
	if !strings.Contains(w.Log(), `"msg":"noted the death in the run records of the jobs it held"`) {
		t.Errorf("%s's supervisor did not note the death:\n%s", w.Name, tailString(w.Log(), 4000))
	}
	return jobID
}

// childPID is the pid of w's worker process, which its supervisor logs.
func childPID(t *testing.T, w *localstack.Proc) int {
	t.Helper()
	m := regexp.MustCompile(`"msg":"worker process started"[^\n]*"pid":(\d+)`).FindStringSubmatch(w.Log())
	if m == nil {
		t.Fatalf("%s's supervisor did not log its worker process:\n%s", w.Name, tailString(w.Log(), 4000))
	}
	pid, _ := strconv.Atoi(m[1])
	if pid <= 1 || pid == w.PID() {
		t.Fatalf("%s's worker process is pid %d, its supervisor %d", w.Name, pid, w.PID())
	}
	return pid
}

// lastDeadLetter is the last dead letter of variant B, as an operator
// would read it.
func lastDeadLetter(ctx context.Context, url string) (nats.Header, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, natsqueue.DeadStream)
	if err != nil {
		return nil, err
	}
	msg, err := st.GetLastMsgForSubject(ctx, natsqueue.DeadSubject(genq.VariantB))
	if err != nil {
		return nil, fmt.Errorf("no dead letter: %w", err)
	}
	return msg.Header, nil
}
