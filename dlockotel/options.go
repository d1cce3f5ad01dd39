package dlockotel

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dlockgo/dlock/seam"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultSlowHold is the default slow-hold threshold (WithSlowHold), the
// same as dlockprom's.
const DefaultSlowHold = 3 * time.Second

// maxBackendLen caps the backend name (WithBackend), in bytes.
const maxBackendLen = 64

// Option configures an Observer. An Option that is given a bad value makes
// New return an error wrapping dlock.ErrInvalidArgument (or
// ErrInvalidDuration).
type Option func(*config) error

type config struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	backend   string
	names     bool
	group     func(string) string
	maxGroups int
	slowAfter time.Duration
}

// WithTracerProvider sets where spans go (default: the global
// TracerProvider, otel.GetTracerProvider, when New is called).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil TracerProvider", seam.ErrInvalidArgument)
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets where metrics go (default: the global
// MeterProvider, otel.GetMeterProvider, when New is called).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", seam.ErrInvalidArgument)
		}
		c.mp = mp
		return nil
	}
}

// WithBackend names the lock service the observed client talks to (say
// "redis", "etcd", "zookeeper"): every span and metric then carries it as
// dlock.backend. Without it the attribute is left out. One Observer serves
// one backend's clients; give each backend an Observer of its own. The name
// must be valid UTF-8 of 1 to 64 bytes.
func WithBackend(name string) Option {
	return func(c *config) error {
		if name == "" || len(name) > maxBackendLen || !utf8.ValidString(name) {
			return fmt.Errorf("%w: backend name %q (want 1 to %d bytes of UTF-8)", seam.ErrInvalidArgument, name, maxBackendLen)
		}
		c.backend = name
		return nil
	}
}

// WithLockNames records the lock name as dlock.lock.name on every span.
// Metrics never carry it (a lock name may hold an order id: one series per
// order). Without this option no span carries the name: names can be
// personal or secret ("user:alice@example.com"), and they are unbounded.
func WithLockNames() Option {
	return func(c *config) error {
		c.names = true
		return nil
	}
}

// WithGroup records f(name) as dlock.lock.group on every span and metric: a
// bounded label for the lock name, such as "stock" for "stock:1001"
// (observe.DefaultGroup is such a function). Whatever f returns, at most
// WithMaxGroups distinct values are used, later ones become observe.OtherGroup; an
// empty result becomes observe.NoGroup, invalid UTF-8 is replaced and values are cut
// to 64 bytes. Without this option nothing derived from the name is
// recorded.
func WithGroup(f func(name string) string) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil group function", seam.ErrInvalidArgument)
		}
		c.group = f
		return nil
	}
}

// WithMaxGroups limits the distinct dlock.lock.group values to n (default
// observe.DefaultMaxGroups); the names of further groups are recorded under
// observe.OtherGroup.
func WithMaxGroups(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max groups %d (want >= 1)", seam.ErrInvalidArgument, n)
		}
		c.maxGroups = n
		return nil
	}
}

// WithSlowHold sets the slow-hold threshold (default DefaultSlowHold); 0
// turns slow-hold counting off. A hold kept by the watchdog is counted in
// dlock.slow_holds at its first renewal past the threshold, while it is
// still held; any other hold when it ends (its last Unlock, or its loss).
// Each hold is counted once.
func WithSlowHold(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: slow hold threshold %v", seam.ErrInvalidDuration, d)
		}
		c.slowAfter = d
		return nil
	}
}
