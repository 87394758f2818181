// Package natsembed starts nats-server in process, for the api on one
// machine and for tests. It is a package of its own so that only what
// imports it links the server.
package natsembed

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configure the in-process nats-server the api starts when
// no NATS_URL is given.
type Options struct {
	Host       string // loopback by default: the embedded server is for one machine
	Port       int    // -1 picks a free port
	StoreDir   string // JetStream file storage
	MaxPayload int32  // 0 keeps the server's default, 1 MB
	HTTPPort   int    // monitoring port (KEDA and nats' own tools read it); 0 disables
	// Name is the server's name, unique within a cluster; "genq-embedded"
	// when empty.
	Name string
	// Cluster, when set, makes the server one node of a JetStream cluster
	// (tests of a cluster on one machine).
	Cluster *Cluster
}

// Cluster is how a node joins its cluster.
type Cluster struct {
	Name   string
	Port   int      // the route listener's port, on Host
	Routes []string // every node's route URL, nats://host:port (its own is skipped by the server)
}

// Start starts a nats-server with JetStream and waits until it
// accepts connections.
func Start(o Options) (*server.Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: "genq-embedded",
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		MaxPayload: o.MaxPayload,
		NoSigs:     true,
		NoLog:      true,
	}
	if o.Name != "" {
		opts.ServerName = o.Name
	}
	if c := o.Cluster; c != nil {
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: o.Host, Port: c.Port}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("embedded nats: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if o.HTTPPort != 0 {
		opts.HTTPHost = o.Host
		opts.HTTPPort = o.HTTPPort
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats did not start on %s", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	}
	return ns, nil
}
