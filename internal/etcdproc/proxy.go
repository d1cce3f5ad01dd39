package etcdproc

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/dlockgo/dlock/internal/freeport"
)

// Proxy forwards TCP connections from its own loopback address to a target
// (a member's client address), and can cut them off: a client that talks
// to a member only through a Proxy is partitioned from it by Cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{} // both ends of every open pair
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Endpoint returns the proxy's address as a client URL.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			// A black hole: the connection is open, nothing gets through.
			p.conns[in] = struct{}{}
			p.wg.Add(1)
			go p.drain(in)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(out, in)
		go p.pump(in, out)
	}
}

// pump copies from src to dst until either fails; while the proxy is cut
// what it reads is dropped.
func (p *Proxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.forget(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if !cut {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// drain reads and drops everything from c until it is closed.
func (p *Proxy) drain(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	_, _ = io.Copy(io.Discard, c)
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// Cut turns the proxy into a black hole: open connections stay open but
// nothing passes in either direction, and new connections are accepted and
// then ignored — a network partition as the client sees it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal ends a Cut: the connections that were cut are closed (their streams
// lost data) and new ones are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
