package localstack

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target, holding
// back every byte for a delay in each direction: a slow link between one
// process and another, in order and without loss. Frozen, it plays the
// target stopped (SIGSTOP): it swallows what either side sends.
type Proxy struct {
	Port   int
	ln     net.Listener
	target string
	delay  time.Duration
	frozen atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln, target: target, delay: delay}
	go p.serve()
	return p, nil
}

// URL is the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(p.Port) }

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}

// Freeze makes every connection swallow what either side sends from now
// on, as a process that reads nothing and answers nothing does.
func (p *Proxy) Freeze() { p.frozen.Store(true) }

// Cut closes every connection, as a client does once it judges its server
// dead (what a frozen proxy swallowed is gone), and thaws the proxy: new
// connections go through.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.frozen.Store(false)
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, each chunk delay after it was read; what it
// reads while frozen is dropped.
func (p *Proxy) pipe(src, dst net.Conn) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 && !p.frozen.Load() {
				ch <- chunk{time.Now().Add(p.delay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}
