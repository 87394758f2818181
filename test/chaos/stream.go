package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/test/localstack"
)

// streamSIGKILL: eight streams open on two workers of four slots; one worker
// is killed with SIGKILL once every stream has its first text, and a
// replacement starts. A stream of the survivor must end in its whole
// answer and [DONE]; one of the victim, whose job runs again, in a clean
// error event: never cut short without a word, never repeated text.
func streamSIGKILL(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "stream-sigkill", "B", 2,
		"TEXT_CONTEXT_SIZE=4096", "TEXT_MAX_NEW_TOKENS=3000", "TEXT_IGNORE_EOS=true", "SLOTS=4")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	const streams = 8
	var firsts sync.WaitGroup
	firsts.Add(streams)
	outs := make([]localstack.Outcome, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			outs[i] = openStream(ctx, e.client, s.URL(), fmt.Sprintf("stream %d: tell me a long story", i), firsts.Done)
		})
	}
	firsted := make(chan struct{})
	go func() { firsts.Wait(); close(firsted) }()
	select {
	case <-firsted:
	case <-time.After(60 * time.Second):
		return localstack.Report{}, fmt.Errorf("the streams never all began")
	}
	s.Workers()[0].Kill()
	_, _ = s.StartWorker(ctx, false)
	wg.Wait()
	rep := localstack.Summarize("", outs, workerLogs(s))
	rep.Notes = append(rep.Notes, "8 streams on 2 workers × 4 slots, 3000-token answers; 1 worker killed once all had text; errors are error events at the end of a stream")
	if rep.Lost > 0 || rep.OK+rep.Errors["503"] != streams {
		return rep, fmt.Errorf("%d streams lost", rep.Lost)
	}
	return rep, nil
}

// openStream reads one chat stream to its end. Its outcome is 200 for a
// stream that ends in a finish reason and [DONE], a clean 503 error for one
// that ends in an error event, and lost for anything else (a stream cut
// short, text after the end).
func openStream(ctx context.Context, client *http.Client, url, text string, first func()) localstack.Outcome {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"model": "genq", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		first()
		return localstack.Outcome{Err: err}
	}
	defer resp.Body.Close()
	o := localstack.Outcome{Status: resp.StatusCode, Header: resp.Header, JobID: resp.Header.Get("Genq-Job-Id")}
	finished, done, errEvent, began := false, false, "", false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if !began {
			began = true
			first()
		}
		if done || errEvent != "" {
			o.Err = fmt.Errorf("an event after the end: %q", data)
			break
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			o.Err = err
			break
		}
		if c.Error != nil {
			errEvent = c.Error.Message
		}
		for _, ch := range c.Choices {
			finished = finished || ch.FinishReason != nil
		}
	}
	if !began {
		first()
	}
	o.Latency = time.Since(start)
	switch {
	case o.Err != nil:
	case done && finished:
	case errEvent != "":
		o.Status, o.Body = http.StatusServiceUnavailable, []byte(`{"error":`+fmt.Sprintf("%q", errEvent)+`}`)
	default:
		o.Err = fmt.Errorf("the stream ended without [DONE] or an error event")
	}
	return o
}
