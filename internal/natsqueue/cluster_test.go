package natsqueue

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
)

// startCluster starts a 3-node JetStream cluster in process and returns its
// client URLs, comma-separated.
func startCluster(t *testing.T) string {
	t.Helper()
	_, urls := startClusterNodes(t)
	return urls
}

// startClusterNodes is startCluster, with the nodes, for a test that stops
// one.
func startClusterNodes(t *testing.T) ([]*server.Server, string) {
	t.Helper()
	const n = 3
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	nodes := make([]*server.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			nodes[i], errs[i] = natsembed.Start(natsembed.Options{
				Name: fmt.Sprintf("node-%d", i), Port: ports[i], StoreDir: t.TempDir(),
				Cluster: &natsembed.Cluster{Name: "genq-test", Port: ports[n+i], Routes: routes},
			})
		})
	}
	wg.Wait()
	var urls []string
	for i, ns := range nodes {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		urls = append(urls, ns.ClientURL())
	}
	return nodes, strings.Join(urls, ",")
}

// On a fresh 3-node cluster, components that start together (an api and
// workers, each on its own node) all open the assets, each asset once with
// its 3 replicas, rather than timing out on each other's creates.
func TestFreshClusterAssetsCreatedTogether(t *testing.T) {
	t.Parallel()
	urls := startCluster(t)
	st := DefaultSettings()
	st.Replicas = 3
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	nodeURLs := strings.Split(urls, ",")
	const components = 6
	conns := make([]*Conn, components)
	errs := make([]error, components)
	took := make([]time.Duration, components)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range components {
		wg.Go(func() {
			conns[i], errs[i] = Dial(ctx, ConnectOptions{URL: nodeURLs[i%len(nodeURLs)]}, st, testLog(t), genq.VariantB)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, c := range conns {
		if errs[i] != nil {
			t.Fatalf("component %d: %v", i, errs[i])
		}
		t.Cleanup(c.Close)
	}
	t.Logf("every component ready after %v", took)
	c := conns[0]
	for _, name := range []string{JobsStream, BatchStream, DeadStream, "KV_" + CancelBucket, "KV_" + AttemptsBucket, "KV_" + WorkersBucket, "OBJ_" + ResultsBucket} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Errorf("%s: %d replicas configured, cluster %+v; want 3", name, info.Config.Replicas, info.Cluster)
		}
	}
}

// freePorts returns n loopback ports nobody listens on right now.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
