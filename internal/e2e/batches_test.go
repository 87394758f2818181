package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
)

type batchObject struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
	CompletedAt *int64 `json:"completed_at"`
	CancelledAt *int64 `json:"cancelled_at"`
}

// upload posts a file to /v1/files as the SDKs do.
func (s *stack) upload(name string, data []byte, purpose string) response {
	s.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", purpose)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, s.api.URL+"/v1/files", &body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	return r
}

func (s *stack) waitBatch(id string, until func(batchObject) bool) batchObject {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b := decodeAs[batchObject](s.t, s.get("/v1/batches/"+id))
		if until(b) {
			return b
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("batch %s still %s with %+v", id, b.Status, b.RequestCounts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func chatLines(n int, extra func(i int) string) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"line %d"}]%s}}`+"\n", i, i, extra(i))
	}
	return b.Bytes()
}

// TestBatches: a file of chat requests, a few with a JSON schema, runs as
// a batch to completed; its output file holds one answer per custom_id,
// the schema lines' answers valid JSON; a bad file fails the batch naming
// its lines, and bad requests are refused in OpenAI's shape, nothing
// queued.
func TestBatches(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorkerWith(textgen.Config{Slots: 4, Threads: 1, MaxNewTokens: 128, ContextSize: 1024})
	schema := `,"max_tokens":128,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}}}`
	input := chatLines(24, func(i int) string {
		if i%6 == 0 {
			return schema
		}
		return `,"max_tokens":4`
	})
	up := s.upload("in.jsonl", input, "batch")
	var file struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Bytes   int    `json:"bytes"`
		Purpose string `json:"purpose"`
	}
	if err := json.Unmarshal(up.body, &file); err != nil || up.status != 200 || file.Object != "file" || file.Bytes != len(input) || file.Purpose != "batch" {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	if got := s.get("/v1/files/" + file.ID + "/content"); !bytes.Equal(got.body, input) {
		t.Fatalf("the file's content is not what was uploaded: %d %.200s", got.status, got.body)
	}
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"run":"1"}}`)
	b := decodeAs[batchObject](t, r)
	if r.status != 200 || b.Object != "batch" || b.Status != "validating" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	b = s.waitBatch(b.ID, func(b batchObject) bool { return b.Status == "completed" })
	if b.RequestCounts.Total != 24 || b.RequestCounts.Completed != 24 || b.RequestCounts.Failed != 0 || b.OutputFileID == nil || b.ErrorFileID != nil || b.CompletedAt == nil {
		t.Fatalf("batch %+v", b)
	}
	out := s.get("/v1/files/" + *b.OutputFileID + "/content")
	seen := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out.body)), "\n") {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int            `json:"status_code"`
				Body       chatCompletion `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Response.StatusCode != 200 || len(l.Response.Body.Choices) != 1 {
			t.Fatalf("output line %q: %v", line, err)
		}
		seen[l.CustomID]++
		var i int
		fmt.Sscanf(l.CustomID, "req-%d", &i)
		if i%6 == 0 {
			var obj struct {
				OK *bool `json:"ok"`
			}
			if err := json.Unmarshal([]byte(l.Response.Body.Choices[0].Message.Content), &obj); err != nil || obj.OK == nil {
				t.Fatalf("%s: %q does not match its schema", l.CustomID, l.Response.Body.Choices[0].Message.Content)
			}
		}
	}
	if len(seen) != 24 {
		t.Fatalf("%d custom_ids in the output: %v", len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s is in the output %d times", id, n)
		}
	}
	list := decodeAs[struct {
		Data []batchObject `json:"data"`
	}](t, s.get("/v1/batches?limit=5"))
	if len(list.Data) != 1 || list.Data[0].ID != b.ID {
		t.Fatalf("list: %+v", list)
	}

	before := s.jobsPublished()
	bad := append(chatLines(3, func(int) string { return "" }), `{"custom_id":"req-1","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}
not json
{"custom_id":"x","method":"POST","url":"/v1/completions","body":{"prompt":"a"}}
`...)
	up = s.upload("bad.jsonl", bad, "batch")
	_ = json.Unmarshal(up.body, &file)
	r = s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	b = s.waitBatch(decodeAs[batchObject](t, r).ID, func(b batchObject) bool { return b.Status != "validating" })
	codes := map[string]int{}
	if b.Errors != nil {
		for _, e := range b.Errors.Data {
			codes[e.Code] = *e.Line
		}
	}
	if b.Status != "failed" || codes["duplicate_custom_id"] != 4 || codes["invalid_json_line"] != 5 || codes["mismatched_endpoint"] != 6 {
		t.Fatalf("a bad file: %+v, errors %v", b, codes)
	}
	for _, tt := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"an unknown file", `{"input_file_id":"file-nope","endpoint":"/v1/chat/completions","completion_window":"24h"}`, 404, "no file file-nope"},
		{"an endpoint genq does not batch", `{"input_file_id":"` + file.ID + `","endpoint":"/v1/moderations","completion_window":"24h"}`, 400, `endpoint "/v1/moderations"`},
		{"another window", `{"input_file_id":"` + file.ID + `","endpoint":"/v1/chat/completions","completion_window":"1h"}`, 400, "completion_window"},
	} {
		r := s.postKey("/v1/batches", "", tt.body)
		if e := decodeAs[v1Err](t, r); r.status != tt.status || !strings.Contains(e.Error.Message, tt.want) {
			t.Errorf("%s: %d %s; want %d with %q", tt.name, r.status, r.body, tt.status, tt.want)
		}
	}
	if r := s.upload("x.jsonl", []byte("{}"), "fine-tune"); r.status != 400 || !strings.Contains(string(r.body), `purpose \"fine-tune\"`) {
		t.Errorf("another purpose: %d %s", r.status, r.body)
	}
	if r := s.get("/v1/files/file-nope"); r.status != 404 {
		t.Errorf("an unknown file: %d %s", r.status, r.body)
	}
	if got := s.jobsPublished(); got != before {
		t.Fatalf("%d jobs queued by refused batches", got-before)
	}
}

// TestBatchLimitsAndCancel: a file over MAX_FILE_BYTES is a 413; a batch
// cancelled while it runs ends cancelled, its finished requests in its
// output file, each once.
func TestBatchLimitsAndCancel(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{Batches: httpapi.BatchConfig{MaxFileBytes: 16384, Window: 2}}})
	s.tinyTextWorkerWith(textgen.Config{Slots: 1, Threads: 1, MaxNewTokens: 64, IgnoreEOS: true})
	if r := s.upload("big.jsonl", bytes.Repeat([]byte("x"), 17000), "batch"); r.status != 413 {
		t.Fatalf("a file over the limit: %d %s", r.status, r.body)
	}
	up := s.upload("in.jsonl", chatLines(30, func(int) string { return `,"max_tokens":64` }), "batch")
	var file struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(up.body, &file)
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	b := s.waitBatch(decodeAs[batchObject](t, r).ID, func(b batchObject) bool { return b.RequestCounts.Completed >= 2 })
	r = s.postKey("/v1/batches/"+b.ID+"/cancel", "", "")
	if c := decodeAs[batchObject](t, r); r.status != 200 || c.Status != "cancelling" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	b = s.waitBatch(b.ID, func(b batchObject) bool { return b.Status == "cancelled" })
	if b.CancelledAt == nil || b.RequestCounts.Completed < 2 || b.RequestCounts.Completed >= 30 || b.OutputFileID == nil {
		t.Fatalf("cancelled batch %+v", b)
	}
	out := strings.Split(strings.TrimSpace(string(s.get("/v1/files/"+*b.OutputFileID+"/content").body)), "\n")
	seen := map[string]bool{}
	for _, line := range out {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || seen[l.CustomID] {
			t.Fatalf("output line %q (%v)", line, err)
		}
		seen[l.CustomID] = true
	}
	if len(seen) != b.RequestCounts.Completed {
		t.Fatalf("%d lines in the output, %d completed", len(seen), b.RequestCounts.Completed)
	}
	if r := s.postKey("/v1/batches/"+b.ID+"/cancel", "", ""); r.status != 200 {
		t.Fatalf("cancelling a cancelled batch: %d %s", r.status, r.body)
	}
}

// TestBatchWebhook: a batch created with genq's webhook posts the ended
// batch, signed as asynchronous jobs' webhooks are.
func TestBatchWebhook(t *testing.T) {
	hooks := make(chan []byte, 2)
	var sig string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig = r.Header.Get(httpapi.HeaderSignature)
		hooks <- body
	}))
	defer receiver.Close()
	hookURL, _ := url.Parse(receiver.URL)
	const secret = "whsec-batch"
	s := newStack(t, stackOptions{http: httpapi.Config{Async: httpapi.AsyncConfig{PollEvery: 50 * time.Millisecond, WebhookSecret: secret,
		WebhookAllow: []string{hookURL.Hostname()}, WebhookAllowPrivate: true}}})
	s.tinyTextWorker(4)
	up := s.upload("in.jsonl", chatLines(3, func(int) string { return `,"max_tokens":4` }), "batch")
	var file struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(up.body, &file)
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","webhook":"`+receiver.URL+`/hook"}`)
	id := decodeAs[batchObject](t, r).ID
	body := waitFor(t, hooks, 60*time.Second, "the batch's webhook")
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	sec, _ := strconv.ParseInt(ts, 10, 64)
	if want := httpapi.Sign(secret, time.Unix(sec, 0), body); sig != want {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	if b := decodeAs[batchObject](t, response{status: 200, body: body}); b.ID != id || b.Status != "completed" || b.RequestCounts.Completed != 3 {
		t.Fatalf("webhook body %s", body)
	}
	if r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h","webhook":"https://evil.example/x"}`); r.status != 400 {
		t.Fatalf("a webhook to a host not allowed: %d %s", r.status, r.body)
	}
}

// TestBatchExpires: a batch whose completion window closes before its
// requests run ends expired, with expired_at, and its error file lists
// every custom_id as batch_expired, as OpenAI's does; the requests it
// queued are dropped, not run after.
func TestBatchExpires(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{Batches: httpapi.BatchConfig{Expiry: 2 * time.Second, Window: 2}}})
	const n = 5
	up := s.upload("in.jsonl", chatLines(n, func(int) string { return `,"max_tokens":4` }), "batch")
	var file struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(up.body, &file)
	// No worker: nothing runs before the window closes.
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	b := s.waitBatch(decodeAs[batchObject](t, r).ID, func(b batchObject) bool { return b.Status == "expired" })
	var raw struct {
		ExpiredAt *int64 `json:"expired_at"`
	}
	_ = json.Unmarshal(s.get("/v1/batches/"+b.ID).body, &raw)
	if raw.ExpiredAt == nil || b.OutputFileID != nil || b.ErrorFileID == nil || b.RequestCounts.Total != n ||
		b.RequestCounts.Completed != 0 || b.RequestCounts.Failed != n {
		t.Fatalf("expired batch %+v, expired_at %v", b, raw.ExpiredAt)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(s.get("/v1/files/"+*b.ErrorFileID+"/content").body)), "\n") {
		var l struct {
			CustomID string          `json:"custom_id"`
			Response json.RawMessage `json:"response"`
			Error    struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || seen[l.CustomID] || l.Error.Code != "batch_expired" || string(l.Response) != "null" {
			t.Fatalf("error file line %q (%v)", line, err)
		}
		seen[l.CustomID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d custom_ids in the error file, want %d", len(seen), n)
	}
	// A worker that comes now finds the queued requests cancelled.
	w := newTestBackend(2)
	s.startWorker(w, time.Second)
	time.Sleep(2 * time.Second)
	if calls := w.calls.Load(); calls != 0 {
		t.Fatalf("%d requests of the expired batch ran", calls)
	}
}

// TestBatchManyAnswers: a batch's request may ask for several answers, as
// its route allows (n above 1; a list of prompts for /v1/completions): its
// output line holds them all, as one answer of its route, its choices
// indexed in the route's order.
func TestBatchManyAnswers(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorker(4)
	run := func(endpoint string, input []byte) map[string][]int {
		t.Helper()
		up := s.upload("in.jsonl", input, "batch")
		var file struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(up.body, &file)
		r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"`+endpoint+`","completion_window":"24h"}`)
		b := s.waitBatch(decodeAs[batchObject](t, r).ID, func(b batchObject) bool {
			return b.Status != "validating" && b.Status != "in_progress" && b.Status != "finalizing"
		})
		if b.Status != "completed" || b.RequestCounts.Failed != 0 || b.OutputFileID == nil {
			t.Fatalf("%s batch %+v (%s)", endpoint, b, r.body)
		}
		choices := map[string][]int{}
		for line := range strings.SplitSeq(strings.TrimSpace(string(s.get("/v1/files/"+*b.OutputFileID+"/content").body)), "\n") {
			var l struct {
				ID       string `json:"id"`
				CustomID string `json:"custom_id"`
				Response struct {
					StatusCode int `json:"status_code"`
					Body       struct {
						Choices []struct {
							Index int     `json:"index"`
							Text  *string `json:"text"`
						} `json:"choices"`
						Usage struct {
							CompletionTokens int `json:"completion_tokens"`
						} `json:"usage"`
					} `json:"body"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Response.StatusCode != 200 || choices[l.CustomID] != nil {
				t.Fatalf("output line %q: %v", line, err)
			}
			if l.Response.Body.Usage.CompletionTokens != 4*len(l.Response.Body.Choices) {
				t.Errorf("%s: %d completion tokens for %d choices of 4 tokens", l.CustomID, l.Response.Body.Usage.CompletionTokens, len(l.Response.Body.Choices))
			}
			for _, c := range l.Response.Body.Choices {
				choices[l.CustomID] = append(choices[l.CustomID], c.Index)
			}
		}
		return choices
	}
	chat := run("/v1/chat/completions", []byte(
		`{"custom_id":"three","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"n":3}}`+"\n"+
			`{"custom_id":"one","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}}`+"\n"))
	if fmt.Sprint(chat["three"]) != "[0 1 2]" || fmt.Sprint(chat["one"]) != "[0]" {
		t.Fatalf("chat choices %v", chat)
	}
	completions := run("/v1/completions", []byte(
		`{"custom_id":"list","method":"POST","url":"/v1/completions","body":{"prompt":["a","b"],"max_tokens":4,"n":2}}`+"\n"))
	if fmt.Sprint(completions["list"]) != "[0 1 2 3]" {
		t.Fatalf("completion choices %v", completions)
	}
}
