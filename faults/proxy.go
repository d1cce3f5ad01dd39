package faults

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is an in-process toxiproxy TCP proxy on a free loopback port in
// front of one upstream address. Toxics are added by name and removed by
// Heal; Close stops the proxy and closes every connection through it.
type Proxy struct {
	px    *toxiproxy.Proxy
	names []string
}

var proxySeq atomic.Int64

// NewProxy starts a proxy in front of upstream ("127.0.0.1:port").
func NewProxy(upstream string) (*Proxy, error) {
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	name := fmt.Sprintf("faults-%d", proxySeq.Add(1))
	px := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("faults: proxy to %s: %w", upstream, err)
	}
	return &Proxy{px: px}, nil
}

// Addr is the address clients dial instead of the upstream.
func (p *Proxy) Addr() string { return p.px.Listen }

func (p *Proxy) add(name, typ, stream string, attrs string) error {
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, typ, stream, attrs)
	if _, err := p.px.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("faults: toxic %s: %w", name, err)
	}
	p.names = append(p.names, name)
	return nil
}

// Delay delays every reply (Redis to client) by d: requests reach Redis on
// time, the client hears back d later.
func (p *Proxy) Delay(d time.Duration) error {
	return p.add("latency", "latency", "downstream", fmt.Sprintf(`"latency":%d`, d.Milliseconds()))
}

// Timeout drops everything sent to Redis and closes each connection after d
// (toxiproxy's timeout toxic). With d == 0 connections stay open and every
// byte is dropped: a black hole.
func (p *Proxy) Timeout(d time.Duration) error {
	return p.add("timeout", "timeout", "upstream", fmt.Sprintf(`"timeout":%d`, d.Milliseconds()))
}

// Blackhole drops everything both ways and keeps connections open: a
// network partition that looks like a very slow server.
func (p *Proxy) Blackhole() error {
	if err := p.add("blackhole-up", "timeout", "upstream", `"timeout":0`); err != nil {
		return err
	}
	return p.add("blackhole-down", "timeout", "downstream", `"timeout":0`)
}

// ResetPeer answers every request with a TCP RST after d.
func (p *Proxy) ResetPeer(d time.Duration) error {
	return p.add("reset", "reset_peer", "upstream", fmt.Sprintf(`"timeout":%d`, d.Milliseconds()))
}

// Heal removes every toxic.
func (p *Proxy) Heal() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range p.names {
		if err := p.px.Toxics.RemoveToxic(ctx, n); err != nil {
			return fmt.Errorf("faults: heal %s: %w", n, err)
		}
	}
	p.names = nil
	return nil
}

// Close removes the toxics and stops the proxy.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.px.Toxics.ResetToxics(ctx)
	p.px.Stop()
	return nil
}
