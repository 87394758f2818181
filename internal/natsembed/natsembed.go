// Package natsembed starts nats-server in process, for the api on one
// machine and for tests. It is a package of its own so that only what
// imports it links the server.
package natsembed

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	said := &errorLog{}
	ns.SetLogger(said, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		err := fmt.Errorf("embedded nats did not start on %s", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		if lines := said.lines(); len(lines) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.Join(lines, "; "))
		}
		return nil, err
	}
	return ns, nil
}

// errorLog keeps the last errors the server logged, so that a start that
// fails says why (a port taken: "Error listening on port"). It only
// records: a fatal error stops nothing, as with no logger at all, since a
// node restarted on its old route port may report the port taken and
// still serve.
type errorLog struct {
	mu   sync.Mutex
	said []string
}

// errorLogKeeps bounds what errorLog keeps over a server's life.
const errorLogKeeps = 8

func (l *errorLog) record(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.said) == errorLogKeeps {
		l.said = l.said[1:]
	}
	l.said = append(l.said, fmt.Sprintf(format, v...))
}

func (l *errorLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.said)
}

func (l *errorLog) Fatalf(format string, v ...any) { l.record(format, v...) }
func (l *errorLog) Errorf(format string, v ...any) { l.record(format, v...) }
func (l *errorLog) Noticef(string, ...any)         {}
func (l *errorLog) Warnf(string, ...any)           {}
func (l *errorLog) Debugf(string, ...any)          {}
func (l *errorLog) Tracef(string, ...any)          {}
