package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/test/localstack"
)

// The tenant scenarios: the faults with API keys of two tenants, each
// with every limit set (far above the load, so that any refusal is the
// fault's) and weights 1:3. After the fault, each tenant's counters in
// GENQ_TENANTS must count every request the api admitted exactly once:
// all but those refused because the counters could not be reached.

// tenantScenarios run in `make chaos` (single) or `make chaos-cluster`.
var tenantScenarios = []scenario{
	{"tenants: NATS restarted under load", func(ctx context.Context, e env) (localstack.Report, error) {
		return tenantFault(ctx, e, "tenants-nats-restart", 1, "", restartNATS)
	}},
}

var tenantClusterScenarios = []scenario{
	{"cluster, tenants: counters' leader killed", func(ctx context.Context, e env) (localstack.Report, error) {
		return tenantFault(ctx, e, "tenants-kill-counters-leader", 3, "KV_"+natsqueue.TenantsBucket, kill)
	}},
	{"cluster, tenants: job stream's leader killed", func(ctx context.Context, e env) (localstack.Report, error) {
		return tenantFault(ctx, e, "tenants-kill-jobs-leader", 3, natsqueue.JobsStream, kill)
	}},
}

// restartNATS stops the single nats-server for 2 s.
func restartNATS(ctx context.Context, s *localstack.Stack, _ int) string {
	_ = s.NATS.Stop(10 * time.Second)
	time.Sleep(2 * time.Second)
	if err := s.StartNATS(ctx); err != nil {
		return "stopped; restart failed: " + err.Error()
	}
	return "stopped (SIGTERM), back after 2s"
}

// tenantStack starts NATS (nodes of it), the api with the tenants' keys,
// and two workers.
func tenantStack(ctx context.Context, e env, name string, nodes int) (*localstack.Stack, error) {
	dir := filepath.Join(e.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lines []string
	for _, k := range chaosKeys {
		lines = append(lines, k[0]+" tenant="+k[1]+" "+k[2])
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	s := &localstack.Stack{Bin: e.bin, Dir: dir, Variant: "B", Env: append([]string{}, commonEnv...), APIEnv: []string{"API_KEYS_FILE=" + keys}}
	if nodes > 1 {
		s.Nodes, s.Env = nodes, append([]string{}, clusterEnv...)
	}
	return startStack(ctx, s, 2)
}

// tenantFault runs both tenants' load, 4 requests each at a time, lets f
// befall the node leading stream (the only one when stream is empty) 3 s
// in, keeps the load on 5 s after, and compares the counters with the
// answers.
func tenantFault(ctx context.Context, e env, name string, nodes int, stream string, f fault) (localstack.Report, error) {
	s, err := tenantStack(ctx, e, name, nodes)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	target, i := "nats-server", 0
	if stream != "" {
		leader, err := leaderOf(ctx, s.NATSURL(), stream, "")
		if err != nil {
			return localstack.Report{}, err
		}
		target, i = stream+"'s leader "+leader, s.NodeIndex(leader)
	}
	stop := make(chan struct{})
	var what string
	go func() {
		time.Sleep(3 * time.Second)
		what = f(ctx, s, i)
		time.Sleep(5 * time.Second)
		close(stop)
	}()
	byTenant := tenantLoad(ctx, s.URL(), name, 4, stop)
	var outs []localstack.Outcome
	for _, o := range byTenant {
		outs = append(outs, o...)
	}
	rep := localstack.Summarize("", outs, workerLogs(s))
	rep.Notes = append(rep.Notes, fmt.Sprintf("2 tenants, 4 in flight each; %s %s, 3s after the load began", target, what))
	counts, err := checkCounters(ctx, s.NATSURL(), byTenant)
	rep.Notes = append(rep.Notes, counts)
	if err != nil {
		return rep, err
	}
	if nodes > 1 {
		return rep, judgeCluster(outs, workerLogs(s))
	}
	return rep, nil
}

// tenantLoad sends each tenant's requests, conc at a time, until stop is
// closed, and returns their outcomes by tenant.
func tenantLoad(ctx context.Context, url, prefix string, conc int, stop <-chan struct{}) map[string][]localstack.Outcome {
	var mu sync.Mutex
	outs := map[string][]localstack.Outcome{}
	var wg sync.WaitGroup
	for _, k := range chaosKeys {
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
					r := localstack.Request{Text: fmt.Sprintf("%s %s %d-%d: tell me about queues", prefix, k[1], w, i), Key: k[0]}
					o := localstack.Generate(ctx, http.DefaultClient, url, r, 60*time.Second)
					mu.Lock()
					outs[k[1]] = append(outs[k[1]], o)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return outs
}
