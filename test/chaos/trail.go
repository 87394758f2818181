package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// trailMost bounds the jobs a trail names: the first few tell where to
// look, and a note stays one table cell.
const trailMost = 4

// logLine is what a trail reads of one JSON log line of the api or a
// worker.
type logLine struct {
	Time   time.Time `json:"time"`
	Msg    string    `json:"msg"`
	JobID  string    `json:"job_id"`
	Code   string    `json:"code"`
	Worker string    `json:"worker_id"`
}

// unansweredTrail names the jobs the api gave up on without an answer
// (its "generate failed" lines with code timeout or canceled: a deadline,
// or a client that stopped waiting) and, for each, the last thing a worker
// logged of it, or that none did. A request lost to the client has no job
// id, but its job is among these: the trail says whether it never ran, or
// ran and was done while its caller went on waiting.
func unansweredTrail(apiLog, workerLogs string) string {
	var gaveUp []logLine
	for _, l := range readLog(apiLog) {
		if l.Msg == "generate failed" && l.JobID != "" && (l.Code == "timeout" || l.Code == "canceled") {
			gaveUp = append(gaveUp, l)
		}
	}
	if len(gaveUp) == 0 {
		return ""
	}
	last := map[string]logLine{}
	for _, l := range readLog(workerLogs) {
		if l.JobID != "" {
			last[l.JobID] = l
		}
	}
	var parts []string
	for i, g := range gaveUp {
		if i == trailMost {
			parts = append(parts, fmt.Sprintf("%d more", len(gaveUp)-trailMost))
			break
		}
		seen := "no worker logged it"
		if w, ok := last[g.JobID]; ok {
			seen = fmt.Sprintf("last logged by %s %q at %s", w.Worker, w.Msg, w.Time.Format("15:04:05.000"))
		}
		parts = append(parts, fmt.Sprintf("job %s given up (%s) at %s, %s", g.JobID, g.Code, g.Time.Format("15:04:05.000"), seen))
	}
	return "unanswered: " + strings.Join(parts, "; ")
}

// readLog reads the JSON lines of logs, skipping any other.
func readLog(logs string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}
