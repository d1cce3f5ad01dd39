package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/internal/peerlink"
	"github.com/dlockgo/dlock/internal/proc"
)

// ErrNoPeerProxies is returned by Isolate, Partition and Heal on an
// ensemble started without Options.PeerProxies.
var ErrNoPeerProxies = peerlink.ErrNoMesh

// links is embedded under a name of its own, so that its methods are the
// Ensemble's but the field is not exported.
type links = peerlink.Mesh[*Server]

// Ensemble is a quorum of ZooKeeper servers on loopback.
//
// With Options.PeerProxies it has, from the embedded links between its
// servers (quorum and election ports alike): Isolate(s), which cuts every
// link between s and the others (s keeps running and its clients still
// reach it, but it neither hears from nor reaches its peers: an isolated
// leader gives up after syncLimit ticks and from then on serves no
// client); Partition(groups...), which cuts the links between servers of
// different groups and brings up those within a group (every server in
// exactly one group, else an error and no change); Heal, which brings
// every link up (the connections that were cut are closed, so the servers
// dial again); IsCut(a, b); and Others(s). Without PeerProxies they return
// ErrNoPeerProxies.
type Ensemble struct {
	Servers []*Server
	*links  // nil without Options.PeerProxies
}

// peerPorts are a server's quorum and election ports.
type peerPorts struct{ quorum, election int }

// StartEnsemble starts n servers (n >= 1; 3 is the usual) that form one
// ensemble, and returns once every one serves as leader or follower. On
// error the servers already started are stopped.
func StartEnsemble(ctx context.Context, n int, o Options) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zkproc: ensemble of %d servers", n)
	}
	java, err := lookJava()
	if err != nil {
		return nil, err
	}
	e := &Ensemble{}
	fail := func(err error) (*Ensemble, error) {
		e.Close()
		return nil, err
	}
	// Every port first (with PeerProxies the others reach a server's
	// quorum and election ports at its proxies'), then every server, then
	// the proxies, then the processes: a proxy asks the servers for their
	// pids as soon as it runs.
	real, seen := make([]peerPorts, n), make([]peerPorts, n)
	for i := range n {
		s, err := newServer(o, i+1)
		if err != nil {
			return fail(err)
		}
		e.Servers = append(e.Servers, s)
		if real[i], err = takePorts(); err == nil {
			s.peer, seen[i] = real[i], real[i]
			if o.PeerProxies {
				seen[i], err = takePorts()
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	for i, s := range e.Servers {
		var members []string
		for j := range n {
			p := seen[j]
			if j == i {
				p = real[j] // the ports it binds
			}
			members = append(members, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j+1, p.quorum, p.election))
		}
		if err := s.writeConfig(o, members); err != nil {
			return fail(err)
		}
		if s.process, err = proc.New(s.spec(java, o)); err != nil {
			return fail(err)
		}
	}
	if o.PeerProxies {
		e.links = peerlink.NewMesh(e.Servers)
		if err := e.front(real, seen); err != nil {
			return fail(err)
		}
	}
	for _, s := range e.Servers {
		if err := proc.Launch(s.process); err != nil {
			return fail(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range e.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Await(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return e, nil
}

// takePorts returns free quorum and election ports.
func takePorts() (peerPorts, error) {
	quorum, err1 := freeport.Take(false)
	election, err2 := freeport.Take(false)
	if err := errors.Join(err1, err2); err != nil {
		return peerPorts{}, fmt.Errorf("zkproc: %w", err)
	}
	return peerPorts{quorum, election}, nil
}

// front starts the proxies in front of every server's quorum and election
// ports, on the ports seen. The election proxies rewrite the greeting so
// that a server dialing back does so through them.
func (e *Ensemble) front(real, seen []peerPorts) error {
	elections := map[int]int{} // real election port -> its proxy's
	for i := range real {
		elections[real[i].election] = seen[i].election
	}
	proxyOf := func(real int) (int, bool) {
		via, ok := elections[real]
		return via, ok
	}
	for i, s := range e.Servers {
		_, err := peerlink.Front(e.links, s, portAddr(seen[i].quorum), portAddr(real[i].quorum), nil)
		if err == nil {
			_, err = peerlink.Front(e.links, s, portAddr(seen[i].election), portAddr(real[i].election),
				func(src io.Reader) ([]byte, error) { return rewriteElectionAddr(src, proxyOf) })
		}
		if err != nil {
			return fmt.Errorf("zkproc: %w", err)
		}
	}
	return nil
}

// Addrs returns every server's client address.
func (e *Ensemble) Addrs() []string {
	out := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		out[i] = s.Addr()
	}
	return out
}

// ConnectString returns the addresses joined by commas.
func (e *Ensemble) ConnectString() string { return strings.Join(e.Addrs(), ",") }

// Leader waits until exactly one running server says it leads and returns
// it.
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) { return e.LeaderIn(ctx, e.Servers...) }

// LeaderIn waits until exactly one running server of servers says it leads
// and returns it: after a partition, LeaderIn(ctx, majority...) waits for
// the majority's own leader while the server cut off may still say it
// leads.
func (e *Ensemble) LeaderIn(ctx context.Context, servers ...*Server) (*Server, error) {
	for {
		var leaders []*Server
		for _, s := range servers {
			if s.PID() == 0 {
				continue
			}
			if m, err := s.Mode(ctx); err == nil && m == "leader" {
				leaders = append(leaders, s)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zkproc: waiting for a leader: %w (%d servers say leader)", ctx.Err(), len(leaders))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops and removes every server and closes the peer proxies.
func (e *Ensemble) Close() error {
	var errs []error
	for _, s := range e.Servers {
		errs = append(errs, s.Close())
	}
	errs = append(errs, e.links.Close())
	return errors.Join(errs...)
}
