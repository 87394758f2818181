package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/test/localstack"
)

// Interactive first: the latency of interactive chat requests with the
// server idle and while a batch of 2,000 requests runs, in one run, on one
// worker; and the batch's own time. Batch jobs ride their own lane, taken
// only when no interactive job waits, so an interactive request waits at
// most for a batch request already running to end.

type batchBeside struct {
	lines              int
	idle, busy         []time.Duration // interactive latencies, sorted, per round
	idleP50s, busyP50s []time.Duration
	batchTook          time.Duration
	completed, failed  int
}

const batchBesideLines = 2000

func (b *bench) batchBesideInteractive(ctx context.Context) error {
	env := []string{"SLOTS=4", "TEXT_MAX_NEW_TOKENS=16", "TEXT_IGNORE_EOS=true", "TEXT_SEED=42"}
	s, _, err := b.stack(ctx, "batch", "B", nil, env...)
	if err != nil {
		return err
	}
	defer s.Close()
	lines, perRound := batchBesideLines, 30
	if b.quick {
		lines, perRound = 200, 10
	}
	r := batchBeside{lines: lines}
	chat := func(tag string) ([]time.Duration, error) {
		var lat []time.Duration
		for i := range perRound {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"%s %d"}],"max_tokens":16}`, tag, i)
			t0 := time.Now()
			if err := localstack.Call(ctx, http.DefaultClient, http.MethodPost, s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body), nil); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat, nil
	}
	// Idle and busy rounds alternate while the batch runs, each idle one
	// measured before the batch starts or after it ends: rounds of one run.
	idle, err := chat("idle")
	if err != nil {
		return err
	}
	r.idle = append(r.idle, idle...)
	r.idleP50s = append(r.idleP50s, pct(idle, .5))
	t0 := time.Now()
	id, err := localstack.StartBatch(ctx, http.DefaultClient, s.URL(), localstack.ChatBatchInput(lines, 16))
	if err != nil {
		return err
	}
	var final localstack.BatchStatus
	for {
		st, err := localstack.WaitBatch(ctx, http.DefaultClient, s.URL(), id, func(localstack.BatchStatus) bool { return true })
		if err != nil {
			return err
		}
		if st.Status != "validating" && st.Status != "in_progress" && st.Status != "finalizing" {
			final = st
			break
		}
		if st.Status == "in_progress" && st.RequestCounts.Completed < lines*9/10 {
			busy, err := chat("busy")
			if err != nil {
				return err
			}
			r.busy = append(r.busy, busy...)
			r.busyP50s = append(r.busyP50s, pct(busy, .5))
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.batchTook = time.Since(t0)
	r.completed, r.failed = final.RequestCounts.Completed, final.RequestCounts.Failed
	if final.Status != "completed" {
		return fmt.Errorf("batch %s ended %s with %+v", id, final.Status, final.RequestCounts)
	}
	seen, err := localstack.BatchOutput(ctx, http.DefaultClient, s.URL(), final)
	if err != nil {
		return err
	}
	if len(seen) != lines {
		return fmt.Errorf("the output holds %d custom_ids of %d", len(seen), lines)
	}
	idle, err = chat("idle again")
	if err != nil {
		return err
	}
	r.idle = append(r.idle, idle...)
	r.idleP50s = append(r.idleP50s, pct(idle, .5))
	slices.Sort(r.idle)
	slices.Sort(r.busy)
	if len(r.busy) == 0 {
		return fmt.Errorf("the batch ended before a busy round could run")
	}
	b.result.batch = r
	fmt.Fprintf(b.out, "   idle p50 %s, beside the batch p50 %s (%.2fx); batch of %d in %s\n",
		pct(r.idle, .5), pct(r.busy, .5), float64(pct(r.busy, .5))/float64(pct(r.idle, .5)), lines, r.batchTook.Round(time.Second))
	return nil
}

func (b *bench) batchMarkdown() string {
	r := b.result.batch
	if len(r.busy) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "`make bench` (or `go run ./test/bench -only batch`), commit `%s`, %s, load average %s. One worker (4 slots, the tiny model, 16 tokens an answer) behind one api; interactive requests are chats of 16 tokens, one at a time, in rounds of %d; a batch of %d chat requests of 16 tokens runs through `/v1/batches`.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAverage(), len(r.idle)/len(r.idleP50s), r.lines)
	fmt.Fprintf(&sb, "| | requests | p50 | p99 | p50 of a round: least / median / most |\n|---|---|---|---|---|\n")
	rounds := func(xs []time.Duration) string {
		s := slices.Sorted(slices.Values(xs))
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
		return fmt.Sprintf("%d rounds: %s / %s / %s ms", len(s), ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
	}
	fmt.Fprintf(&sb, "| interactive, idle (before and after the batch) | %d | %s | %s | %s |\n", len(r.idle), pct(r.idle, .5).Round(100*time.Microsecond), pct(r.idle, .99).Round(100*time.Microsecond), rounds(r.idleP50s))
	fmt.Fprintf(&sb, "| interactive, beside the batch | %d | %s | %s | %s |\n", len(r.busy), pct(r.busy, .5).Round(100*time.Microsecond), pct(r.busy, .99).Round(100*time.Microsecond), rounds(r.busyP50s))
	fmt.Fprintf(&sb, "\nInteractive p50 beside the batch: **%.2f×** the idle p50 (the issue's bound: 1.5×). The batch: %d requests, %d answered, %d failed, in %s, each custom_id once in its output.\n",
		float64(pct(r.busy, .5))/float64(pct(r.idle, .5)), r.lines, r.completed, r.failed, r.batchTook.Round(100*time.Millisecond))
	return sb.String()
}
