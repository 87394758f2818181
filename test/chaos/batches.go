package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/test/localstack"
)

// The Batch API under faults: a batch of chat requests runs while the api
// that accepted it is killed (another api on the same NATS finishes it), a
// worker is killed, or NATS restarts. Each time the batch completes with
// every custom_id in its output exactly once, and no request runs twice.

const batchLines = 60

// batchInput is a file of n chat requests, custom_ids b-0 to b-(n-1).
func batchInput(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"b-%d","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"batch line %d"}],"max_tokens":48}}`+"\n", i, i)
	}
	return b.Bytes()
}

type batchStatus struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

// startBatch uploads the input to the api at url and creates its batch.
func startBatch(ctx context.Context, url string, input []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(input)
	_ = mw.Close()
	var file struct {
		ID string `json:"id"`
	}
	if err := call(ctx, http.MethodPost, url+"/v1/files", mw.FormDataContentType(), &body, &file); err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	var b batchStatus
	create := `{"input_file_id":"` + file.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`
	if err := call(ctx, http.MethodPost, url+"/v1/batches", "application/json", strings.NewReader(create), &b); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	return b.ID, nil
}

func call(ctx context.Context, method, url, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = data
		return nil
	}
	return json.Unmarshal(data, out)
}

// waitBatch polls the batch at url until until holds, through errors (an
// api or NATS away).
func waitBatch(ctx context.Context, url, id string, until func(batchStatus) bool) (batchStatus, error) {
	var b batchStatus
	for {
		err := call(ctx, http.MethodGet, url+"/v1/batches/"+id, "", nil, &b)
		if err == nil && until(b) {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return b, fmt.Errorf("batch %s: %s with %+v: %w (last: %v)", id, b.Status, b.RequestCounts, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// judgeBatch checks a batch ended completed with every custom_id once in
// its output, and reports it.
func judgeBatch(ctx context.Context, url string, b batchStatus, s *localstack.Stack, t0 time.Time, note string) (localstack.Report, error) {
	rep := localstack.Summarize("", nil, workerLogs(s))
	rep.Sent = batchLines
	if b.Status != "completed" || b.OutputFileID == nil {
		return rep, fmt.Errorf("batch %s ended %s with %+v", b.ID, b.Status, b.RequestCounts)
	}
	var out []byte
	if err := call(ctx, http.MethodGet, url+"/v1/files/"+*b.OutputFileID+"/content", "", nil, &out); err != nil {
		return rep, err
	}
	seen := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return rep, fmt.Errorf("output line %q: %w", line, err)
		}
		seen[l.CustomID]++
	}
	for i := range batchLines {
		switch n := seen["b-"+strconv.Itoa(i)]; {
		case n == 1:
			rep.OK++
		case n == 0:
			rep.Lost++
		default:
			rep.Duplicated++
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%s; batch of %d completed in %s, %d answered, %d failed", note, batchLines,
		time.Since(t0).Round(100*time.Millisecond), b.RequestCounts.Completed, b.RequestCounts.Failed))
	if rep.OK != batchLines {
		return rep, errors.New("the output does not hold every custom_id exactly once")
	}
	return rep, nil
}

// batchAPIKilled: the api that accepted a batch is killed with SIGKILL
// mid-batch; a second api on the same NATS takes the batch's lease when it
// lapses and finishes it.
func batchAPIKilled(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-api-killed", "B", 2)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	port, err := localstack.FreePort()
	if err != nil {
		return localstack.Report{}, err
	}
	other := "http://127.0.0.1:" + strconv.Itoa(port)
	api2, err := localstack.Start("api2", s.Bin.API, nil, append([]string{"VARIANT=" + s.Variant, "NATS_URL=" + s.NATSURL(),
		"ADDR=127.0.0.1:" + strconv.Itoa(port), "METRICS_ADDR=127.0.0.1:0"}, s.Env...), s.Dir)
	if err != nil {
		return localstack.Report{}, err
	}
	defer func() { _ = api2.Stop(5 * time.Second) }()
	if err := localstack.WaitHTTP(ctx, other+"/readiness"); err != nil {
		return localstack.Report{}, err
	}
	t0 := time.Now()
	id, err := startBatch(ctx, s.URL(), batchInput(batchLines))
	if err != nil {
		return localstack.Report{}, err
	}
	if _, err := waitBatch(ctx, s.URL(), id, func(b batchStatus) bool { return b.RequestCounts.Completed >= 5 }); err != nil {
		return localstack.Report{}, err
	}
	s.API.Kill()
	b, err := waitBatch(ctx, other, id, func(b batchStatus) bool { return b.Status != "in_progress" && b.Status != "validating" && b.Status != "finalizing" })
	if err != nil {
		return localstack.Report{}, err
	}
	return judgeBatch(ctx, other, b, s, t0, "the accepting api killed after 5 answers; the other api took the batch's lease (15 s) and finished it")
}

// batchWorkerKilled: one of two workers is killed with SIGKILL mid-batch
// and replaced.
func batchWorkerKilled(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-worker-killed", "B", 2)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	t0 := time.Now()
	killAndReplace(ctx, s, `"msg":"job started"`, 500*time.Millisecond)
	id, err := startBatch(ctx, s.URL(), batchInput(batchLines))
	if err != nil {
		return localstack.Report{}, err
	}
	b, err := waitBatch(ctx, s.URL(), id, func(b batchStatus) bool { return b.Status == "completed" || b.Status == "failed" })
	if err != nil {
		return localstack.Report{}, err
	}
	return judgeBatch(ctx, s.URL(), b, s, t0, "1 of 2 workers killed mid-batch and replaced; ack wait 3s")
}

// batchNATSRestart: the nats-server is stopped mid-batch and started again
// two seconds later on the same storage.
func batchNATSRestart(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-nats-restart", "B", 2)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	t0 := time.Now()
	id, err := startBatch(ctx, s.URL(), batchInput(batchLines))
	if err != nil {
		return localstack.Report{}, err
	}
	if _, err := waitBatch(ctx, s.URL(), id, func(b batchStatus) bool { return b.RequestCounts.Completed >= 5 }); err != nil {
		return localstack.Report{}, err
	}
	_ = s.NATS.Stop(10 * time.Second)
	time.Sleep(2 * time.Second)
	if err := s.StartNATS(ctx); err != nil {
		return localstack.Report{}, err
	}
	b, err := waitBatch(ctx, s.URL(), id, func(b batchStatus) bool { return b.Status == "completed" || b.Status == "failed" })
	if err != nil {
		return localstack.Report{}, err
	}
	return judgeBatch(ctx, s.URL(), b, s, t0, "nats-server down 2 s after 5 answers")
}
