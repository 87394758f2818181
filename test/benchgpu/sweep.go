package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/gguf"

	"github.com/genq/genq/test/localstack"
)

type sweepOptions struct {
	url, model, label, out string
	levels                 []int
	tokens, rounds         int
	copyGBps               float64
}

// Results is one model's sweep, as report reads it back.
type Results struct {
	Model       string    `json:"model"`
	Device      string    `json:"device"`
	When        time.Time `json:"when"`
	Tokens      int       `json:"tokens_per_answer"`
	WeightBytes uint64    `json:"weight_bytes_per_token"`
	CopyGBps    float64   `json:"copy_gbps"`
	Levels      []Level   `json:"levels"`
	// Peer is llama-batched-bench's decode tok/s by sequences, from the
	// file beside the results when the run wrote one.
	Peer map[int]float64 `json:"-"`
}

// Level is one concurrency's figures.
type Level struct {
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	TokPerS     float64 `json:"tok_per_s"`
	P50s        float64 `json:"p50_s"`
	P99s        float64 `json:"p99_s"`
	GPUUtilPct  float64 `json:"gpu_util_pct"` // mean of nvidia-smi's samples during the level
	GPUMemMiB   float64 `json:"gpu_mem_mib"`  // the most it reported
}

func sweep(ctx context.Context, o sweepOptions, log io.Writer) (*Results, error) {
	res := &Results{Model: o.label, When: time.Now().UTC(), Tokens: o.tokens, CopyGBps: o.copyGBps}
	if o.model != "" {
		if res.Model == "" {
			res.Model = filepath.Base(o.model)
		}
		b, err := weightBytesPerToken(o.model)
		if err != nil {
			return nil, err
		}
		res.WeightBytes = b
	}
	res.Device = gpuName(ctx)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	prompt := func(i int) localstack.Request {
		return localstack.Request{Text: fmt.Sprintf("Request %d. Write a long story about a lighthouse keeper and the sea.", i)}
	}
	// Warm up: the first steps of a fresh worker compile kernels and fill
	// allocator pools.
	warm := make([]localstack.Request, 2)
	for i := range warm {
		warm[i] = prompt(-1 - i)
	}
	for _, out := range localstack.Fire(ctx, client, o.url, warm, 2, 10*time.Minute) {
		if out.Status != http.StatusOK {
			return nil, fmt.Errorf("warm-up request: status %d: %v %s", out.Status, out.Err, out.Body)
		}
	}
	for _, c := range o.levels {
		reqs := make([]localstack.Request, c*o.rounds)
		for i := range reqs {
			reqs[i] = prompt(i)
		}
		smi := startSMI(ctx)
		start := time.Now()
		outs := localstack.Fire(ctx, client, o.url, reqs, c, 10*time.Minute)
		elapsed := time.Since(start)
		util, mem := smi.stop()
		lv := Level{Concurrency: c, Requests: len(reqs), GPUUtilPct: util, GPUMemMiB: mem}
		var lat []time.Duration
		for _, out := range outs {
			if out.Status != http.StatusOK {
				lv.Failed++
				continue
			}
			lat = append(lat, out.Latency)
		}
		slices.Sort(lat)
		if len(lat) > 0 {
			lv.P50s = lat[len(lat)/2].Seconds()
			lv.P99s = lat[min(len(lat)-1, len(lat)*99/100)].Seconds()
		}
		lv.TokPerS = float64(len(lat)*o.tokens) / elapsed.Seconds()
		fmt.Fprintf(log, "%s c%d: %.1f tok/s, p50 %.2fs p99 %.2fs, GPU %.0f%%, %d failed\n",
			res.Model, c, lv.TokPerS, lv.P50s, lv.P99s, lv.GPUUtilPct, lv.Failed)
		res.Levels = append(res.Levels, lv)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// weightBytesPerToken is what one decode step must read of the model: every
// tensor but the token embeddings, of which it reads one row.
func weightBytesPerToken(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	meta, err := gguf.Read(f, st.Size())
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var n uint64
	for _, t := range meta.Tensors {
		if t.Name == "token_embd.weight" {
			continue
		}
		size, err := t.Type.Size(t.Shape)
		if err != nil {
			return 0, fmt.Errorf("%s: tensor %s: %w", path, t.Name, err)
		}
		n += size
	}
	return n, nil
}

func gpuName(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=name", "--format=csv,noheader").Output()
	if err != nil {
		return "unknown (no nvidia-smi)"
	}
	return strings.TrimSpace(strings.Split(string(out), "\n")[0])
}

// smiSampler reads nvidia-smi's utilization and memory every 200 ms.
type smiSampler struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	util []float64
	mem  float64
}

func startSMI(ctx context.Context) *smiSampler {
	s := &smiSampler{done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "200")
	out, err := s.cmd.StdoutPipe()
	if err != nil || s.cmd.Start() != nil {
		close(s.done)
		s.cmd = nil
		return s
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Split(sc.Text(), ",")
			if len(f) < 2 {
				continue
			}
			u, err1 := strconv.ParseFloat(strings.TrimSpace(f[0]), 64)
			m, err2 := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
			if err1 != nil || err2 != nil {
				continue
			}
			s.mu.Lock()
			s.util = append(s.util, u)
			s.mem = max(s.mem, m)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *smiSampler) stop() (utilPct, memMiB float64) {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.util) == 0 {
		return 0, 0
	}
	var sum float64
	for _, u := range s.util {
		sum += u
	}
	return sum / float64(len(s.util)), s.mem
}
