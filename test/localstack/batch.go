package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// The Batch API as its clients drive it, for the chaos and bench programs.

type BatchStatus struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

// StartBatch uploads input to the api at url through client and creates
// its batch of chat requests.
func StartBatch(ctx context.Context, client *http.Client, url string, input []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(input)
	_ = mw.Close()
	var file struct {
		ID string `json:"id"`
	}
	if err := Call(ctx, client, http.MethodPost, url+"/v1/files", mw.FormDataContentType(), &body, &file); err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	var b BatchStatus
	create := `{"input_file_id":"` + file.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`
	if err := Call(ctx, client, http.MethodPost, url+"/v1/batches", "application/json", strings.NewReader(create), &b); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	return b.ID, nil
}

// Call makes one request through client and decodes its 200 answer into
// out (a *[]byte takes the body as it is; nil, nothing).
func Call(ctx context.Context, client *http.Client, method, url, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
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

// WaitBatch polls the batch at url until until holds, through errors (an
// api or NATS away).
func WaitBatch(ctx context.Context, client *http.Client, url, id string, until func(BatchStatus) bool) (BatchStatus, error) {
	var b BatchStatus
	for {
		err := Call(ctx, client, http.MethodGet, url+"/v1/batches/"+id, "", nil, &b)
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

// BatchOutput counts the custom_ids of a batch's output file.
func BatchOutput(ctx context.Context, client *http.Client, url string, b BatchStatus) (map[string]int, error) {
	if b.OutputFileID == nil {
		return nil, fmt.Errorf("batch %s has no output file", b.ID)
	}
	var out []byte
	if err := Call(ctx, client, http.MethodGet, url+"/v1/files/"+*b.OutputFileID+"/content", "", nil, &out); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("output line %q: %w", line, err)
		}
		seen[l.CustomID]++
	}
	return seen, nil
}

// ChatBatchInput is a file of n chat requests of maxTokens each,
// custom_ids b-0 to b-(n-1).
func ChatBatchInput(n, maxTokens int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"b-%d","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"batch line %d"}],"max_tokens":%d}}`+"\n", i, i, maxTokens)
	}
	return b.Bytes()
}
