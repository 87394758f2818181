package localstack

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A Stack with Nodes above 1 runs a JetStream cluster of that many
// nats-server processes on loopback instead of one server, and its genq
// api keeps every asset on all of them (NATS_REPLICAS, its alone).

// node is one nats-server of a cluster.
type node struct {
	name                string
	clientPort, cluPort int
}

// startCluster starts s.Nodes nats-servers routed to each other.
func (s *Stack) startCluster(ctx context.Context) error {
	s.nodes = make([]node, s.Nodes)
	for i := range s.nodes {
		cp, err := FreePort()
		if err != nil {
			return err
		}
		rp, err := FreePort()
		if err != nil {
			return err
		}
		s.nodes[i] = node{name: fmt.Sprintf("n%d", i+1), clientPort: cp, cluPort: rp}
	}
	s.NATSPort = s.nodes[0].clientPort
	s.NATSNodes = make([]*Proc, len(s.nodes))
	s.APIEnv = append(s.APIEnv, "NATS_REPLICAS="+strconv.Itoa(min(len(s.nodes), 3)))
	for i := range s.nodes {
		if err := s.StartNode(ctx, i); err != nil {
			return err
		}
	}
	s.NATS = s.NATSNodes[0]
	return nil
}

// StartNode starts node i of the cluster (again, after a kill: it keeps
// its storage) and waits until it accepts clients.
func (s *Stack) StartNode(ctx context.Context, i int) error {
	n := s.nodes[i]
	var routes []string
	for _, o := range s.nodes {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(o.cluPort))
	}
	args := append([]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(n.clientPort), "-n", n.name,
		"-sd", filepath.Join(s.Dir, "nats-"+n.name), "--cluster_name", "genq",
		"--cluster", "nats://127.0.0.1:" + strconv.Itoa(n.cluPort), "--routes", strings.Join(routes, ",")}, s.NATSArgs...)
	p, err := Start("nats-"+n.name, s.Bin.NATSServer, args, nil, s.Dir)
	if err != nil {
		return err
	}
	s.NATSNodes[i] = p
	return waitTCP(ctx, n.clientPort)
}

// NodeIndex is the index of the node named name (a server name as
// JetStream reports a leader), or -1.
func (s *Stack) NodeIndex(name string) int {
	for i, n := range s.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// KillNode ends node i with SIGKILL, as a lost machine would.
func (s *Stack) KillNode(i int) { s.NATSNodes[i].Kill() }

// FreezeNode stops node i (SIGSTOP) without closing its sockets, as a
// machine that hangs would; ThawNode lets it go on.
func (s *Stack) FreezeNode(i int) error {
	return syscall.Kill(s.NATSNodes[i].PID(), syscall.SIGSTOP)
}

// ThawNode resumes a node FreezeNode stopped.
func (s *Stack) ThawNode(i int) error {
	return syscall.Kill(s.NATSNodes[i].PID(), syscall.SIGCONT)
}
