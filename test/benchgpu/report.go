package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/genq/genq/test/localstack"
)

// llamaCppDecode is llama.cpp's own llama-batched-bench on the same model
// shapes and the same kind of card (one H100 80GB HBM3, CUDA 13; -ngl 99
// -fa on -npp 48 -ntg 256, its decode column), measured on 2026-11-22. It
// samples nothing, so it is the engine's ceiling. Keyed by model label,
// then concurrency. A run's own peer file (readPeer) takes its place.
var llamaCppDecode = map[string]map[int]float64{
	"8B F16":   {1: 166, 4: 506, 16: 1765, 64: 5762},
	"8B Q4_0":  {1: 318, 64: 4732},
	"70B Q4_0": {1: 51.3, 4: 158, 16: 351},
}

// floors are the throughputs genq must reach through HTTP with default
// sampling, and the share of llama.cpp's decode they stand for.
var floors = map[string]map[int]float64{
	"8B F16":   {1: 150, 16: 1400, 64: 4000},
	"70B Q4_0": {16: 300},
}

func report(dir, doc string, stdout io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no results (*.json) in %q", dir)
	}
	var all []Results
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r Results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if r.Peer, err = readPeer(strings.TrimSuffix(f, ".json") + peerSuffix); err != nil {
			return err
		}
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Model < all[j].Model })
	body := section(all)
	if err := localstack.ReplaceSection(doc, "<!-- bench-gpu:begin -->", "<!-- bench-gpu:end -->", body); err != nil {
		return err
	}
	fmt.Fprint(stdout, body)
	return nil
}

func section(all []Results) string {
	var b strings.Builder
	for _, r := range all {
		fmt.Fprintf(&b, "\n### %s on %s (%s)\n\n", r.Model, r.Device, r.When.Format("2006-01-02"))
		fmt.Fprintf(&b, "Closed loop through HTTP → api (embedded NATS) → worker, %d new tokens per answer (`TEXT_IGNORE_EOS`), default sampling (temperature 0.6, top-p 0.9, top-k 50).", r.Tokens)
		bound := 0.0
		if r.WeightBytes > 0 && r.CopyGBps > 0 {
			bound = r.CopyGBps * 1e9 / float64(r.WeightBytes)
			fmt.Fprintf(&b, " One decode step reads %.1f GB of weights; at the measured device copy bandwidth of %.0f GB/s that bounds one sequence at %.0f tok/s.", float64(r.WeightBytes)/1e9, r.CopyGBps, bound)
		}
		if r.Peer != nil {
			b.WriteString(" llama.cpp's figures are its llama-batched-bench from the same engine build, on the same file and card, in the same run.")
		}
		b.WriteString("\n\n| concurrency | genq tok/s | p50 | p99 | GPU busy | GPU memory | llama.cpp decode tok/s | genq / llama.cpp | floor | met |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, lv := range r.Levels {
			peer, ratio := "–", "–"
			p, ok := r.Peer[lv.Concurrency]
			if r.Peer == nil {
				p, ok = llamaCppDecode[r.Model][lv.Concurrency]
			}
			if ok {
				peer, ratio = fmt.Sprintf("%.0f", p), fmt.Sprintf("%.2f", lv.TokPerS/p)
			}
			floor, met := "–", "–"
			if f, ok := floors[r.Model][lv.Concurrency]; ok {
				floor, met = fmt.Sprintf("%.0f", f), "no"
				if lv.TokPerS >= f {
					met = "yes"
				}
			}
			failed := ""
			if lv.Failed > 0 {
				failed = fmt.Sprintf(" (%d of %d failed)", lv.Failed, lv.Requests)
			}
			fmt.Fprintf(&b, "| %d | %.0f%s | %.2f s | %.2f s | %.0f%% | %.1f GiB | %s | %s | %s | %s |\n",
				lv.Concurrency, lv.TokPerS, failed, lv.P50s, lv.P99s, lv.GPUUtilPct, lv.GPUMemMiB/1024, peer, ratio, floor, met)
		}
		if bound > 0 && len(r.Levels) > 0 && r.Levels[0].Concurrency == 1 {
			fmt.Fprintf(&b, "\nAt concurrency 1 genq reaches %.0f%% of the bandwidth bound.\n", 100*r.Levels[0].TokPerS/bound)
		}
	}
	return b.String()
}

// peerSuffix names the peer's file beside a sweep's results: bench-gpu.sh
// writes NAME.json and NAME.llama-batched-bench.jsonl.
const peerSuffix = ".llama-batched-bench.jsonl"

// readPeer reads llama-batched-bench's JSON lines (--output-format jsonl)
// into its decode tokens per second by sequences; nil when there is no file.
func readPeer(path string) (map[int]float64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	peer := map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var row struct {
			PL      int     `json:"pl"`
			SpeedTG float64 `json:"speed_tg"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if row.PL <= 0 || row.SpeedTG <= 0 {
			return nil, fmt.Errorf("%s:%d: no pl and speed_tg in %s", path, n, line)
		}
		peer[row.PL] = row.SpeedTG
	}
	if len(peer) == 0 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	return peer, sc.Err()
}
