package peerlink

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
)

// The tests' other members are the test binary re-executed: it waits for a
// line on stdin, then dials $PEERLINK_DIAL, sends "ping" and prints what
// came back ("pong") or "timeout".
const dialEnv = "PEERLINK_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(dialEnv); addr != "" {
		bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println(ping(addr))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ping dials addr, sends a line and returns the answer, "timeout" if none
// comes within 500 ms, or the error.
func ping(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	return exchange(c)
}

func exchange(c net.Conn) string {
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err.Error()
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(line)
}

// pong serves "pong" for every line on a loopback port until t ends.
func pong(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servePong(t, ln)
	return ln.Addr().String()
}

// servePong serves "pong" for every line on ln until t ends.
func servePong(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := io.WriteString(c, "pong\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// member is a process of the test: this one, or a child.
type member struct {
	name string
	pid  atomic.Int64
}

func (m *member) PID() int { return int(m.pid.Load()) }

// dialFrom runs a child as m, which pings addr once, and returns its answer.
func dialFrom(t *testing.T, m *member, addr string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), dialEnv+"="+addr)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.pid.Store(int64(cmd.Process.Pid))
	io.WriteString(in, "go\n")
	in.Close()
	err = cmd.Wait()
	m.pid.Store(0)
	if err != nil {
		t.Fatalf("the child dialing as %s: %v", m.name, err)
	}
	return strings.TrimSpace(out.String())
}

func TestProxyCutHeal(t *testing.T) {
	p, err := NewProxy(pong(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := exchange(c); got != "pong" {
		t.Fatalf("through the proxy: %q", got)
	}
	p.Cut()
	if got := exchange(c); got != "timeout" {
		t.Fatalf("an open connection through a cut proxy: %q, want a timeout", got)
	}
	if got := ping(p.Addr()); got != "timeout" {
		t.Fatalf("a new connection through a cut proxy: %q, want a timeout", got)
	}
	p.Heal()
	if got := exchange(c); got == "pong" {
		t.Fatal("a connection that was cut still passes after Heal: it lost data, it must be closed")
	}
	if got := ping(p.Addr()); got != "pong" {
		t.Fatalf("a new connection after Heal: %q", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A Mesh tells its members' connections apart by the process that holds
// them: this test process is member a; b and c are children.
func TestMeshLinks(t *testing.T) {
	a, b, c := &member{name: "a"}, &member{name: "b"}, &member{name: "c"}
	a.pid.Store(int64(os.Getpid()))
	mesh := NewMesh([]*member{a, b, c})
	defer mesh.Close()
	// A proxy in front of c's port (a pong server of this test).
	front, err := Front(mesh, c, "", pong(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ping(front.Addr()); got != "pong" {
		t.Fatalf("a to c: %q", got)
	}
	if got := dialFrom(t, b, front.Addr()); got != "pong" {
		t.Fatalf("b to c: %q", got)
	}

	// b cut off from a and c: a still reaches c, b does not.
	if err := mesh.Partition([]*member{a, c}, []*member{b}); err != nil {
		t.Fatal(err)
	}
	if got := ping(front.Addr()); got != "pong" {
		t.Fatalf("a to c with b cut off: %q", got)
	}
	if got := dialFrom(t, b, front.Addr()); got != "timeout" {
		t.Fatalf("b to c with b cut off: %q, want a timeout", got)
	}
	if !mesh.IsCut(b, c) || !mesh.IsCut(a, b) || mesh.IsCut(a, c) {
		t.Fatal("IsCut does not show the partition")
	}

	// c isolated: a's open connection stops passing; Heal closes it and
	// new ones pass again.
	open, err := net.Dial("tcp", front.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if got := exchange(open); got != "pong" {
		t.Fatalf("before the isolation: %q", got)
	}
	if err := mesh.Isolate(c); err != nil {
		t.Fatal(err)
	}
	if got := exchange(open); got != "timeout" {
		t.Fatalf("an open connection from a to c isolated: %q, want a timeout", got)
	}
	if got := dialFrom(t, b, front.Addr()); got != "timeout" {
		t.Fatalf("b to c isolated: %q", got)
	}
	if err := mesh.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := exchange(open); got == "pong" {
		t.Fatal("the cut connection still passes after Heal")
	}
	if got := ping(front.Addr()); got != "pong" {
		t.Fatalf("a to c after Heal: %q", got)
	}
	if got := dialFrom(t, b, front.Addr()); got != "pong" {
		t.Fatalf("b to c after Heal: %q", got)
	}

	// Bad partitions change nothing.
	for _, groups := range [][][]*member{
		{{a, b}},
		{{a, b}, {b, c}},
		{{a, b, c, {name: "stranger"}}},
	} {
		if err := mesh.Partition(groups...); err == nil {
			t.Errorf("Partition(%v): no error", groups)
		}
	}
	if mesh.IsCut(a, b) || mesh.IsCut(b, c) || mesh.IsCut(a, c) {
		t.Fatal("a refused Partition cut a link")
	}
	var none *Mesh[*member]
	if err := none.Isolate(a); !errors.Is(err, ErrNoMesh) {
		t.Fatalf("a nil Mesh: %v, want ErrNoMesh", err)
	}
}

// A connection no member holds passes while its target has no cut link.
func TestMeshStranger(t *testing.T) {
	a, b := &member{name: "a"}, &member{name: "b"} // neither is this process
	mesh := NewMesh([]*member{a, b})
	defer mesh.Close()
	front, err := Front(mesh, b, "", pong(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ping(front.Addr()); got != "pong" {
		t.Fatalf("a stranger with every link up: %q", got)
	}
	if err := mesh.Isolate(a); err != nil {
		t.Fatal(err)
	}
	if got := ping(front.Addr()); got != "timeout" {
		t.Fatalf("a stranger while a link of the target is cut: %q, want a timeout", got)
	}
	if err := mesh.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := ping(front.Addr()); got != "pong" {
		t.Fatalf("a stranger after Heal: %q", got)
	}
}

func TestRemotePorts(t *testing.T) {
	addr := pong(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ports, err := RemotePorts(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := c.RemoteAddr().(*net.TCPAddr).Port
	for _, p := range ports {
		if p == want {
			return
		}
	}
	t.Fatalf("RemotePorts %v lacks %d", ports, want)
}

// A connection that lost data while its gate was cut passes nothing more,
// even if the gate opens before Heal has closed it: the receiver must never
// see a stream with a gap in it.
func TestProxyNoGapAfterCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	p, err := NewProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "before ")
	time.Sleep(100 * time.Millisecond)
	p.Cut()
	io.WriteString(c, "lost ")
	time.Sleep(100 * time.Millisecond)
	// The gate opens without closing the connection (the instant inside
	// Heal between the two).
	p.own.mu.Lock()
	p.own.cut = false
	p.own.mu.Unlock()
	io.WriteString(c, "after")
	time.Sleep(100 * time.Millisecond)
	p.Close()
	if s := <-got; s != "before " {
		t.Fatalf("the server read %q through a connection that lost data, want only %q", s, "before ")
	}
}

// A Mesh's proxy in front of a member whose port refuses holds a
// connection while it dials again: a member that starts listening within
// memberRedial gets it, as a peer's own retry would have; one that does
// not comes to a closed connection after memberRedial, never at once. A
// plain Proxy closes at once.
func TestMeshRedial(t *testing.T) {
	a, b := &member{name: "a"}, &member{name: "b"}
	a.pid.Store(int64(os.Getpid()))
	mesh := NewMesh([]*member{a, b})
	defer mesh.Close()
	target, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	front, err := Front(mesh, b, "", target, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Nothing listens for memberRedial: the connection is closed then.
	c, err := net.Dial("tcp", front.Addr())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetDeadline(start.Add(memberRedial + 5*time.Second))
	_, err = c.Read(make([]byte, 1))
	took := time.Since(start)
	c.Close()
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || took < memberRedial-100*time.Millisecond {
		t.Fatalf("a connection to a port that kept refusing: %v after %v, want it closed after about %v", err, took, memberRedial)
	}

	// The member listens 200 ms after the connection: it goes through.
	c, err = net.Dial("tcp", front.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	listened := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the member comes up late: the fault itself
		ln, err := net.Listen("tcp", target)
		if err == nil {
			servePong(t, ln)
		}
		listened <- err
	}()
	c.SetDeadline(time.Now().Add(memberRedial + 5*time.Second))
	io.WriteString(c, "ping\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if lerr := <-listened; lerr != nil {
		t.Fatal(lerr)
	}
	if err != nil || line != "pong\n" {
		t.Fatalf("a connection made while the member was not yet listening: %q, %v; want it through once the member listens", line, err)
	}

	// A plain Proxy to a refusing port closes the connection at once.
	refusing, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(refusing)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	start = time.Now()
	c2.SetDeadline(start.Add(5 * time.Second))
	if _, err = c2.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > memberRedial/2 {
		t.Fatalf("a plain proxy to a refusing port: %v after %v, want closed at once", err, time.Since(start))
	}
}
