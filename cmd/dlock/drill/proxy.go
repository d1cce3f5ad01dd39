package drill

import (
	"context"
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are in-process toxiproxy proxies that carry the links a drill
// cuts or slows (toxiproxy as a library: no API server, no network access).
type proxies struct {
	server *toxiproxy.ApiServer
	all    []*toxiproxy.Proxy
}

func newProxies() *proxies {
	return &proxies{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
}

// add starts a proxy on a free loopback port in front of upstream.
func (p *proxies) add(name, upstream string) (*toxiproxy.Proxy, error) {
	px := toxiproxy.NewProxy(p.server, name, "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	p.all = append(p.all, px)
	return px, nil
}

func (p *proxies) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, px := range p.all {
		px.Toxics.ResetToxics(ctx)
		px.Stop()
	}
}

// blackhole drops everything both ways on px, keeping connections open
// (toxiproxy's timeout toxic with timeout 0): a network partition.
func blackhole(px *toxiproxy.Proxy) error {
	for _, stream := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"blackhole-%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return err
		}
	}
	return nil
}

// heal removes the blackhole.
func heal(px *toxiproxy.Proxy) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, stream := range []string{"upstream", "downstream"} {
		if err := px.Toxics.RemoveToxic(ctx, "blackhole-"+stream); err != nil {
			return err
		}
	}
	return nil
}

// delay adds d of latency to what flows from upstream to the client.
func delay(px *toxiproxy.Proxy, d time.Duration) error {
	js := fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
	_, err := px.Toxics.AddToxicJson(strings.NewReader(js))
	return err
}
