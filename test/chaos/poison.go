package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/test/localstack"
)

// poisonJob: one job crashes every worker that runs it (the harness plays
// the crash with SIGKILL and restarts the worker, as Kubernetes would).
// Its caller gets a clean error after the attempt limit, the job is
// dead-lettered, and other traffic keeps flowing.
func poisonJob(ctx context.Context, e env) (localstack.Report, error) {
	// Answers of 1,000 tokens: a poison job run alone would otherwise be
	// done before the harness sees it start and plays the crash.
	s, err := newStack(ctx, e, "poison", "B", 2, "JOB_MAX_ATTEMPTS=3",
		"TEXT_CONTEXT_SIZE=2048", "TEXT_MAX_NEW_TOKENS=1000", "TEXT_IGNORE_EOS=true")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	const poisonID = "poison-0001"
	killer := killOnStart(ctx, s, poisonID, nil)
	dir := filepath.Join(s.Dir, "batch")
	_ = os.MkdirAll(dir, 0o755)
	in := filepath.Join(dir, "in.jsonl")
	_ = os.WriteFile(in, []byte(`{"id":"`+poisonID+`","text":"the poison"}`+"\n"), 0o644)
	submit := exec.CommandContext(ctx, s.Bin.Genqctl, "submit", "--variant", "B", "--in", in, "--out", dir, "--timeout", "2m")
	submit.Env = append(os.Environ(), "NATS_URL="+s.NATSURL())
	submitOut := make(chan []byte, 1)
	go func() { b, _ := submit.CombinedOutput(); submitOut <- b }()

	outs := localstack.Fire(ctx, e.client, s.URL(), texts(40, "healthy"), 4, 90*time.Second)
	batchOut := <-submitOut
	kills := killer.stop()
	rep := localstack.Summarize("", outs, workerLogs(s))
	results, _ := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	rep.Notes = append(rep.Notes, fmt.Sprintf("poison job killed %d workers; its caller got %s", kills, strings.TrimSpace(string(results))))
	if !bytes.Contains(results, []byte(`"code":"internal"`)) {
		return rep, fmt.Errorf("the poison job's caller did not get a clean error:\n%s", batchOut)
	}
	// Its first run is not charged (it may have died of a neighbour); then
	// it is a suspect and runs alone three times.
	if kills != 4 {
		return rep, fmt.Errorf("the poison job ran %d times, want 4 (a first run, then 3 alone)", kills)
	}
	if err := deadLettered(ctx, s.NATSURL(), genq.VariantB, poisonID); err != nil {
		return rep, err
	}
	rep.Notes = append(rep.Notes, "dead-lettered on "+natsqueue.DeadSubject(genq.VariantB))
	return rep, nil
}

// poisonBeside: one worker with four slots runs a poison job and three
// long healthy jobs together; the harness plays the crash (SIGKILL) when
// the poison job runs, first once all four have started, and restarts the
// worker each time it dies. The healthy jobs die with it once, come back
// as suspects, run alone and succeed; the poison job's caller gets 500
// after its three crashes while alone.
func poisonBeside(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "poison-beside", "B", 1, "JOB_MAX_ATTEMPTS=3", "SLOTS=4",
		"TEXT_CONTEXT_SIZE=4096", "TEXT_MAX_NEW_TOKENS=4000", "TEXT_IGNORE_EOS=true")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	first := s.Workers()[0]
	reqs := texts(4, "long")
	poisonOut := make(chan localstack.Outcome, 1)
	go func() { poisonOut <- localstack.Generate(ctx, e.client, s.URL(), reqs[0], 90*time.Second) }()
	if err := first.WaitLog(ctx, `"msg":"job started"`); err != nil {
		return localstack.Report{}, err
	}
	var poisonID string
	for _, line := range strings.Split(first.Log(), "\n") {
		if strings.Contains(line, `"msg":"job started"`) {
			poisonID = jobIDOf(line)
			break
		}
	}
	besideFirst := 0
	killer := killOnStart(ctx, s, poisonID, func(w *localstack.Proc) bool {
		if w != first {
			return true
		}
		started := strings.Count(w.Log(), `"msg":"job started"`)
		if started < 4 {
			return false // the crash comes once the healthy jobs run beside it
		}
		besideFirst = started - 1
		return true
	})
	healthy := localstack.Fire(ctx, e.client, s.URL(), reqs[1:], 3, 90*time.Second)
	poison := <-poisonOut
	kills := killer.stop()
	outs := append([]localstack.Outcome{poison}, healthy...)
	rep := localstack.Summarize("", outs, workerLogs(s))
	ok := 0
	for _, o := range healthy {
		if o.Status == http.StatusOK {
			ok++
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("SLOTS=4; the poison job killed the worker %d times (first beside %d healthy jobs, then alone); healthy %d/3 ok; poison answered %d",
		kills, besideFirst, ok, poison.Status))
	if ok != 3 || poison.Status != http.StatusInternalServerError {
		return rep, fmt.Errorf("healthy %d/3 ok and the poison job answered %d, want 3 and 500", ok, poison.Status)
	}
	if kills != 4 || besideFirst != 3 {
		return rep, fmt.Errorf("the poison job killed %d workers, the first beside %d jobs; want 4, and 3 beside", kills, besideFirst)
	}
	if err := deadLettered(ctx, s.NATSURL(), genq.VariantB, poisonID); err != nil {
		return rep, err
	}
	return rep, nil
}

// killer plays a poison job's crash: it kills every worker whose log shows
// the job started (when ready agrees), and starts a new worker in its
// place, as Kubernetes would.
type killer struct {
	halt  chan struct{}
	done  chan struct{}
	kills int
}

func killOnStart(ctx context.Context, s *localstack.Stack, jobID string, ready func(*localstack.Proc) bool) *killer {
	started := regexp.MustCompile(`"msg":"job started"[^\n]*"job_id":"` + regexp.QuoteMeta(jobID) + `"`)
	k := &killer{halt: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		killed := map[string]bool{}
		for {
			select {
			case <-k.halt:
				return
			case <-time.After(10 * time.Millisecond):
			}
			for _, w := range s.Workers() {
				if w.Exited() || killed[w.Name] || !started.MatchString(w.Log()) || ready != nil && !ready(w) {
					continue
				}
				killed[w.Name] = true
				w.Kill()
				k.kills++
				_, _ = s.StartWorker(ctx, false)
			}
		}
	}()
	return k
}

// stop ends the killer and says how many workers it killed.
func (k *killer) stop() int {
	close(k.halt)
	<-k.done
	return k.kills
}

// deadLettered checks, as an operator would, that the last dead letter of
// the variant is the job.
func deadLettered(ctx context.Context, natsURL string, v genq.Variant, jobID string) error {
	js, done, err := localstack.JetStream(natsURL)
	if err != nil {
		return err
	}
	defer done()
	stream, err := js.Stream(ctx, natsqueue.DeadStream)
	if err != nil {
		return fmt.Errorf("dead-letter stream: %w", err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, natsqueue.DeadSubject(v))
	if err != nil {
		return fmt.Errorf("no dead letter for %s: %w", jobID, err)
	}
	if got := msg.Header.Get(natsqueue.HeaderJobID); got != jobID {
		return fmt.Errorf("the last dead letter is job %q, want %q", got, jobID)
	}
	return nil
}
