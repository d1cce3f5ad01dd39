package dlockprom_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlockgo/dlock/observe"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockprom"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAcquireRelease measures one uncontended Mutex acquire + unlock
// against a real redis-server, without an observer and with the Prometheus
// observer, so the observer's share of the cost can be read off.
func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	for _, bc := range []struct {
		name string
		opts func() []dlock.Config
	}{
		{"observer=none", func() []dlock.Config { return nil }},
		{"observer=prometheus", func() []dlock.Config {
			obs, err := dlockprom.New()
			if err != nil {
				b.Fatal(err)
			}
			prometheus.NewRegistry().MustRegister(obs)
			return []dlock.Config{{Observer: obs}}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := dlock.New(rdb, bc.opts()...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			m := c.Mutex("bench:1")
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Acquire(ctx, dlock.Wait(0))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserverEvents measures the observer alone: the events of one
// acquire + unlock (AcquireEvent, ReleaseEvent) over 1000 lock names.
func BenchmarkObserverEvents(b *testing.B) {
	obs, err := dlockprom.New()
	if err != nil {
		b.Fatal(err)
	}
	prometheus.NewRegistry().MustRegister(obs)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("stock:%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			name := names[i%len(names)]
			i++
			obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: name, Result: observe.Acquired, Wait: 300})
			obs.ObserveRelease(observe.ReleaseEvent{Shape: "mutex", Name: name, Token: int64(i), Held: 5000, Last: true})
		}
	})
}
