package zklock

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy between a ZooKeeper client and server that reads
// the protocol's frames (4-byte length, then xid and opcode for a request,
// xid for a reply) so a test can lose one reply, swallow every request of
// one kind, black-hole everything, cut the connections, refuse new ones,
// and wait for the replies to requests of one kind.
type proxy struct {
	t        *testing.T
	ln       net.Listener
	upstream string

	mu       sync.Mutex
	dropOp   int32 // lose the reply to the next request with this opcode (0: none)
	dropXid  int32
	dropping bool
	dropped  chan struct{} // closed when a reply was lost
	black    bool
	swallow  int32 // never forward requests with this opcode (0: none)
	refusing bool  // close new connections at once
	conns    []net.Conn
	ops      map[int32]int32 // the opcode of each request forwarded, by xid
	replies  map[int32]int   // replies seen, by their request's opcode
	replied  chan struct{}   // closed and renewed at every reply counted
}

// ZooKeeper opcodes the tests look for.
const (
	opGetData    = 4
	opMulti      = 14
	opSetWatches = 101
)

func newProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, upstream: upstream, dropped: make(chan struct{}),
		ops: make(map[int32]int32), replies: make(map[int32]int), replied: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// loseReplyTo makes the proxy forward the next request with opcode op, and
// when its reply comes, drop it and close the connection.
func (p *proxy) loseReplyTo(op int32) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropOp = op
	return p.dropped
}

// blackHole stops forwarding anything, on open and new connections; the
// sockets stay open.
func (p *proxy) blackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = true
}

// swallowRequests makes the proxy drop every request with opcode op from
// now on (0: none): the server never sees them and they get no reply.
func (p *proxy) swallowRequests(op int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.swallow = op
}

// refuse makes the proxy close new connections at once (or, with false,
// serve them again).
func (p *proxy) refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = on
}

// cut closes the connections open now; the listener stays.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// replyCount returns how many replies to requests with opcode op the proxy
// has seen.
func (p *proxy) replyCount(op int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replies[op]
}

// waitReplies waits until the proxy has seen n replies to requests with
// opcode op, failing t after d.
func (p *proxy) waitReplies(op int32, n int, d time.Duration) {
	p.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		got, ch := p.replies[op], p.replied
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			p.t.Fatalf("%d replies to opcode %d in %v, want %d", got, op, d, n)
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *proxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing := p.refusing
		p.mu.Unlock()
		if refusing {
			down.Close()
			continue
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		go p.pump(down, up, true)
		go p.pump(up, down, false)
	}
}

// pump copies frames from src to dst; requests is set for client→server.
func (p *proxy) pump(src, dst net.Conn, requests bool) {
	defer src.Close()
	defer dst.Close()
	first := true // the connect request / response has no xid
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(src, body); err != nil {
			return
		}
		p.mu.Lock()
		black := p.black
		if !first && len(body) >= 8 {
			xid := int32(binary.BigEndian.Uint32(body[0:4]))
			if requests {
				op := int32(binary.BigEndian.Uint32(body[4:8]))
				if op == p.swallow {
					p.mu.Unlock()
					continue
				}
				p.ops[xid] = op
			} else if op, ok := p.ops[xid]; ok && xid > 0 {
				delete(p.ops, xid)
				p.replies[op]++
				close(p.replied)
				p.replied = make(chan struct{})
			}
			if requests && p.dropOp != 0 && int32(binary.BigEndian.Uint32(body[4:8])) == p.dropOp {
				p.dropOp, p.dropXid, p.dropping = 0, xid, true
			}
			if !requests && p.dropping && xid == p.dropXid {
				p.dropping = false
				close(p.dropped)
				p.mu.Unlock()
				return // the reply is lost with the connection
			}
		}
		p.mu.Unlock()
		first = false
		if black {
			continue
		}
		if _, err := dst.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}
