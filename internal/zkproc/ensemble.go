package zkproc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
)

// Ensemble is a quorum of ZooKeeper servers on loopback.
type Ensemble struct {
	Servers []*Server
}

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
	var members []string
	for i := 1; i <= n; i++ {
		s, err := newServer(o, java, i)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
		quorum, err1 := freeport.Take(false)
		election, err2 := freeport.Take(false)
		if err := errors.Join(err1, err2); err != nil {
			e.Close()
			return nil, fmt.Errorf("zkproc: %w", err)
		}
		members = append(members, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, quorum, election))
	}
	for _, s := range e.Servers {
		if err := s.writeConfig(o, members); err != nil {
			e.Close()
			return nil, err
		}
		s.mu.Lock()
		err := s.launch()
		s.mu.Unlock()
		if err != nil {
			e.Close()
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range e.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.waitServing(ctx, "leader|follower")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
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
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) {
	for {
		var leaders []*Server
		for _, s := range e.Servers {
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

// Close stops and removes every server.
func (e *Ensemble) Close() error {
	var errs []error
	for _, s := range e.Servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
