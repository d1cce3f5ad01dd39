package etcdproc

import "github.com/dlockgo/dlock/internal/peerlink"

// Proxy forwards TCP connections from its own loopback address to a target
// (a member's client address), and can cut them off: a client that talks
// to a member only through a Proxy is partitioned from it by Cut (open
// connections stay open but nothing passes; new ones are accepted and
// ignored) until Heal (which closes the connections that were cut).
type Proxy struct{ *peerlink.Proxy }

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	p, err := peerlink.NewProxy(target)
	if err != nil {
		return nil, err
	}
	return &Proxy{p}, nil
}

// Endpoint returns the proxy's address as a client URL.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }
