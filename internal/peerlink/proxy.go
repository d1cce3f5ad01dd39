package peerlink

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
)

// Gate is a switch over a set of proxied connections: while it is cut,
// nothing passes on them in either direction (the sockets stay open, as
// in a network partition that drops packets) and new ones are accepted
// and then ignored. Its methods are safe for concurrent use; the zero
// value is an open gate.
type Gate struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// Cut closes the gate.
func (g *Gate) Cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cut = true
}

// Heal opens a cut gate: the connections that were cut are closed (their
// streams lost data) and new ones pass again. Healing an open gate does
// nothing.
func (g *Gate) Heal() {
	g.mu.Lock()
	if !g.cut {
		g.mu.Unlock()
		return
	}
	g.cut = false
	conns := make([]net.Conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// IsCut reports whether the gate is cut.
func (g *Gate) IsCut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cut
}

func (g *Gate) add(cs ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns == nil {
		g.conns = map[net.Conn]struct{}{}
	}
	for _, c := range cs {
		g.conns[c] = struct{}{}
	}
}

func (g *Gate) remove(cs ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range cs {
		delete(g.conns, c)
	}
}

// Rewrite reads the first bytes a dialer sends (a protocol's greeting) and
// returns what the proxy sends on in their place.
type Rewrite func(src io.Reader) ([]byte, error)

// Proxy forwards TCP connections from its own loopback address to a target,
// each through a Gate: a client that reaches a server only through a Proxy
// is partitioned from it while the gate is cut.
type Proxy struct {
	ln      net.Listener
	target  string
	gateOf  func(net.Conn) *Gate // the gate of an accepted connection
	own     *Gate                // NewProxy's single gate
	rewrite Rewrite
	// redial is how long a connection whose target refuses it is kept
	// open while the proxy dials again (0: it is closed at once).
	redial time.Duration

	mu      sync.Mutex
	conns   map[net.Conn]struct{} // both ends of every open pair
	closing chan struct{}         // closed by Close
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection to
// target through one gate, which Cut and Heal work.
func NewProxy(target string) (*Proxy, error) {
	g := &Gate{}
	p, err := listen("", target, func(net.Conn) *Gate { return g }, nil, 0)
	if err != nil {
		return nil, err
	}
	p.own = g
	return p, nil
}

// listen starts a proxy on addr ("" picks a free loopback port) to target
// that puts each connection through the gate gateOf picks, rewriting the
// dialer's greeting with rewrite (if set), and keeping a connection whose
// target refuses it for redial while it dials again.
func listen(addr, target string, gateOf func(net.Conn) *Gate, rewrite Rewrite, redial time.Duration) (*Proxy, error) {
	if addr == "" {
		a, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		addr = a
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, gateOf: gateOf, rewrite: rewrite, redial: redial,
		conns: map[net.Conn]struct{}{}, closing: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut cuts NewProxy's gate: open connections stay open but nothing passes
// in either direction, and new connections are accepted and then ignored.
// It does nothing on a Mesh's proxies, whose links the Mesh cuts.
func (p *Proxy) Cut() {
	if p.own != nil {
		p.own.Cut()
	}
}

// Heal opens NewProxy's gate again: the connections that were cut are
// closed and new ones are forwarded.
func (p *Proxy) Heal() {
	if p.own != nil {
		p.own.Heal()
	}
}

// track registers open connections; false if the proxy is closing.
func (p *Proxy) track(g *Gate, cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	g.add(cs...)
	p.wg.Add(len(cs))
	return true
}

func (p *Proxy) forget(g *Gate, cs ...net.Conn) {
	g.remove(cs...)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		g := p.gateOf(in)
		if g.IsCut() {
			// A black hole: the connection is open, nothing gets through.
			if !p.track(g, in) {
				in.Close()
				continue
			}
			go p.drain(g, in)
			continue
		}
		p.wg.Add(1)
		go p.link(g, in)
	}
}

// redialPause is the pause between a proxy's dials of a target that
// refused.
const redialPause = 20 * time.Millisecond

// link dials the target for in and, once through, pumps both ways. A
// target that refuses is dialled again while p.redial lasts; then in is
// closed.
func (p *Proxy) link(g *Gate, in net.Conn) {
	defer p.wg.Done()
	until := time.Now().Add(p.redial)
	var out net.Conn
	for {
		var err error
		if out, err = net.DialTimeout("tcp", p.target, 5*time.Second); err == nil {
			break
		}
		if !time.Now().Before(until) {
			in.Close()
			return
		}
		select {
		case <-time.After(redialPause):
		case <-p.closing:
			in.Close()
			return
		}
	}
	if !p.track(g, in, out) {
		in.Close()
		out.Close()
		return
	}
	go p.pump(g, out, in, p.rewrite)
	go p.pump(g, in, out, nil)
}

// pump copies from src to dst until either fails, first passing what
// rewrite makes of the greeting (if set). What it reads while g is cut is
// dropped, and from then on it passes nothing more: the stream lost data
// in the middle, and a receiver must never see what follows such a gap
// (Heal closes the connection; until then it is a black hole).
func (p *Proxy) pump(g *Gate, dst, src net.Conn, rewrite Rewrite) {
	defer p.wg.Done()
	defer p.forget(g, dst, src)
	lost := false
	pass := func(b []byte) error {
		if lost = lost || g.IsCut(); lost {
			return nil
		}
		_, err := dst.Write(b)
		return err
	}
	if rewrite != nil {
		head, err := rewrite(src)
		if err != nil || pass(head) != nil {
			return
		}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := pass(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// drain reads and drops everything from c until it is closed.
func (p *Proxy) drain(g *Gate, c net.Conn) {
	defer p.wg.Done()
	defer p.forget(g, c)
	_, _ = io.Copy(io.Discard, c)
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	if p.conns != nil {
		close(p.closing)
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
