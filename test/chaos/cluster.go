package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/test/localstack"
)

// The cluster scenarios (make chaos-cluster): a 3-node JetStream cluster on
// loopback with every asset on all three nodes, one api and two workers of
// 4 slots each, and one node failing under load. They use the production
// ack wait: a settle is retried within it, and the ping interval follows it.
var clusterEnv = []string{"JOB_ACK_WAIT=15s", "HEARTBEAT_TTL=6s", "GENERATE_TIMEOUT=60s", "RETRY_DELAY=200ms", "LOG_LEVEL=info", "SLOTS=4"}

var clusterScenarios = []scenario{
	{"cluster: job stream's leader killed", func(ctx context.Context, e env) (localstack.Report, error) {
		return clusterFault(ctx, e, "kill-jobs-leader", natsqueue.JobsStream, "", kill, 8)
	}},
	{"cluster: results store's leader killed", func(ctx context.Context, e env) (localstack.Report, error) {
		rep, err := clusterFault(ctx, e, "kill-results-leader", "OBJ_"+natsqueue.ResultsBucket, "", kill, 8)
		if err == nil && rep.P99 >= 12*time.Second {
			err = fmt.Errorf("p99 %s after the results store's leader died, want under 12s", rep.P99)
		}
		return rep, err
	}},
	{"cluster: job stream's leader frozen 20s", func(ctx context.Context, e env) (localstack.Report, error) {
		return clusterFault(ctx, e, "freeze-jobs-leader", natsqueue.JobsStream, "", freeze, 8)
	}},
	{"cluster: worker consumer's leader killed, unpaced load", func(ctx context.Context, e env) (localstack.Report, error) {
		return clusterFault(ctx, e, "kill-consumer-leader", natsqueue.JobsStream, "genq-worker-B", kill, 32)
	}},
	{"cluster: counters' leader killed", func(ctx context.Context, e env) (localstack.Report, error) {
		return clusterFault(ctx, e, "kill-counters-leader", "KV_"+natsqueue.TenantsBucket, "", kill, 8)
	}},
	{"cluster: rolling restart", rollingRestart},
	{"cluster: genqctl submit of 300 lines during a leader kill", clusterBatch},
}

// fault is what befalls a node: it returns when the node is back.
type fault func(ctx context.Context, s *localstack.Stack, i int) string

// kill ends the node with SIGKILL and starts it again 10 s later.
func kill(ctx context.Context, s *localstack.Stack, i int) string {
	s.KillNode(i)
	time.Sleep(10 * time.Second)
	_ = s.StartNode(ctx, i)
	return "killed (SIGKILL), back after 10s"
}

// freeze stops the node (SIGSTOP) for 20 s: its sockets stay open.
func freeze(_ context.Context, s *localstack.Stack, i int) string {
	_ = s.FreezeNode(i)
	time.Sleep(20 * time.Second)
	_ = s.ThawNode(i)
	return "frozen (SIGSTOP) for 20s"
}

// newClusterStack starts the cluster, the api and two workers.
func newClusterStack(ctx context.Context, e env, name string) (*localstack.Stack, error) {
	dir := filepath.Join(e.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startStack(ctx, e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: "B", Nodes: 3, Env: append([]string{}, clusterEnv...)}), 2)
}

// leaderOf names the node that leads stream, or its consumer when consumer
// is set.
func leaderOf(ctx context.Context, url, stream, consumer string) (string, error) {
	js, done, err := localstack.JetStream(url)
	if err != nil {
		return "", err
	}
	defer done()
	var ci *jetstream.ClusterInfo
	if consumer != "" {
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return "", err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return "", err
		}
		ci = info.Cluster
	} else {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return "", err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return "", err
		}
		ci = info.Cluster
	}
	if ci == nil || ci.Leader == "" {
		return "", fmt.Errorf("%s %s has no leader", stream, consumer)
	}
	return ci.Leader, nil
}

// load sends requests through client, conc at a time, until stop is
// closed.
func load(ctx context.Context, client *http.Client, url, prefix string, conc int, stop <-chan struct{}) []localstack.Outcome {
	var mu sync.Mutex
	var outs []localstack.Outcome
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				o := localstack.Generate(ctx, client, url, localstack.Request{Text: fmt.Sprintf("%s %d-%d: tell me about queues", prefix, w, i)}, 60*time.Second)
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return outs
}

// judgeCluster fails a cluster scenario on any interactive error but a 503
// whose job never ran: a request the queue never took.
func judgeCluster(outs []localstack.Outcome, logs string) error {
	var unqueued []string
	for _, o := range outs {
		switch {
		case o.Status == http.StatusOK || o.Status == 0:
		case o.Status == http.StatusServiceUnavailable:
			unqueued = append(unqueued, o.JobID)
		default:
			return fmt.Errorf("a request got %d %s", o.Status, o.Body)
		}
	}
	return neverRan(logs, unqueued)
}

// clusterFault runs load at conc requests at a time, lets f befall the node
// that leads stream (or its consumer) 3 s in, and keeps the load on for 5 s
// after the node is back.
func clusterFault(ctx context.Context, e env, name, stream, consumer string, f fault, conc int) (localstack.Report, error) {
	s, err := newClusterStack(ctx, e, name)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	leader, err := leaderOf(ctx, s.NATSURL(), stream, consumer)
	if err != nil {
		return localstack.Report{}, err
	}
	i := s.NodeIndex(leader)
	stop := make(chan struct{})
	var what string
	go func() {
		time.Sleep(3 * time.Second)
		what = f(ctx, s, i)
		time.Sleep(5 * time.Second)
		close(stop)
	}()
	outs := load(ctx, e.client, s.URL(), name, conc, stop)
	rep := localstack.Summarize("", outs, workerLogs(s))
	noteTrail(&rep, s)
	target := stream
	if consumer != "" {
		target = consumer
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%s's leader %s %s, 3s after the load began; %d in flight", target, leader, what, conc))
	return rep, judgeCluster(outs, workerLogs(s))
}

// noteTrail adds to a report that lost requests or got errors the trail
// of the jobs the api gave up on (unansweredTrail), after a moment for
// the api to log the requests their clients gave up on last.
func noteTrail(rep *localstack.Report, s *localstack.Stack) {
	if rep.Lost == 0 && len(rep.Errors) == 0 {
		return
	}
	time.Sleep(time.Second)
	if t := unansweredTrail(s.API.Log(), workerLogs(s)); t != "" {
		rep.Notes = append(rep.Notes, t)
	}
}

// rollingRestart stops each node in turn (SIGTERM), starts it again, and
// waits 5 s before the next, under load.
func rollingRestart(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newClusterStack(ctx, e, "rolling-restart")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		time.Sleep(2 * time.Second)
		for i := range s.NATSNodes {
			_ = s.NATSNodes[i].Stop(10 * time.Second)
			_ = s.StartNode(ctx, i)
			time.Sleep(5 * time.Second)
		}
	}()
	outs := load(ctx, e.client, s.URL(), "rolling", 8, stop)
	rep := localstack.Summarize("", outs, workerLogs(s))
	noteTrail(&rep, s)
	rep.Notes = append(rep.Notes, "each of 3 nodes stopped (SIGTERM) and started again, 5s apart; 8 in flight")
	return rep, judgeCluster(outs, workerLogs(s))
}

// clusterBatch runs genqctl submit of 300 lines and kills the node leading
// the results store 2 s in; the batch must end with 300 results and exit 0.
func clusterBatch(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newClusterStack(ctx, e, "cluster-batch")
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	dir := filepath.Join(s.Dir, "batch")
	_ = os.MkdirAll(dir, 0o755)
	in := filepath.Join(dir, "in.jsonl")
	const n = 300
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"text":"cluster batch line %d"}`+"\n", i)
	}
	_ = os.WriteFile(in, []byte(lines.String()), 0o644)
	leader, err := leaderOf(ctx, s.NATSURL(), "OBJ_"+natsqueue.ResultsBucket, "")
	if err != nil {
		return localstack.Report{}, err
	}
	i := s.NodeIndex(leader)
	go func() {
		time.Sleep(2 * time.Second)
		kill(ctx, s, i)
	}()
	c := exec.CommandContext(ctx, s.Bin.Genqctl, "submit", "--variant", "B", "--in", in, "--out", dir, "--timeout", "60s")
	c.Env = append(os.Environ(), "NATS_URL="+s.NATSURL())
	t0 := time.Now()
	out, err := c.CombinedOutput()
	took := time.Since(t0)
	results, _ := os.ReadFile(filepath.Join(dir, "results.jsonl"))
	ok := bytes.Count(results, []byte(`"generated_text"`))
	rep := localstack.Summarize("", nil, workerLogs(s))
	rep.Sent, rep.OK, rep.Lost = n, ok, n-ok
	rep.Notes = append(rep.Notes, fmt.Sprintf("results store's leader %s killed 2s in, back after 10s; %d/%d results in %s, exit %v",
		leader, ok, n, took.Round(100*time.Millisecond), err))
	if err != nil || ok != n {
		return rep, fmt.Errorf("the batch did not finish: %v\n%s", err, tail(string(out), 3000))
	}
	return rep, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
