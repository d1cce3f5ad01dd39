// Package dlockprom exports the lock signals of package dlock as Prometheus
// metrics: it implements observe.Observer and prometheus.Collector.
//
//	obs, err := dlockprom.New(dlockprom.WithLogger(logger))
//	prometheus.MustRegister(obs)
//	client, err := dlock.New(rdb, dlock.Config{Observer: obs})
//
// Every metric carries the labels shape (mutex, lock, fair, rw_read, ...)
// and group (a bounded function of the lock name, see observe.DefaultGroup); raw
// lock names are never label values. The metrics (with the default
// namespace "dlock"):
//
//	dlock_acquire_total{result}        counter    Acquire calls by result: acquired, not_acquired, error
//	dlock_acquire_wait_seconds         histogram  time successful Acquire calls took (waiting included)
//	dlock_hold_seconds                 histogram  time from grant to Unlock, every Unlock
//	dlock_hold_lease_ratio             histogram  hold time / fixed lease, Unlocks of fixed leases
//	dlock_lost_total{reason}           counter    holds lost: expired, deleted_or_taken, unreachable, max_hold, closed
//	dlock_unlock_found_lost_total      counter    Unlocks that found the lock lost (an incident)
//	dlock_release_failures_total       counter    Unlocks whose release failed: may stay held until its lease runs out
//	dlock_renewals_total               counter    successful watchdog renewals
//	dlock_renewal_failures_total       counter    failed watchdog renewals (not yet a loss)
//	dlock_lease_renewals               histogram  renewals per watchdog lease, observed when the lease ends
//	dlock_held_leases                  gauge      Leases currently held through the observed Clients
//	dlock_slow_holds_total             counter    holds that ran past the slow-hold threshold
package dlockprom

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"github.com/prometheus/client_golang/prometheus"
)

// Bucket boundaries of the histograms.
var (
	waitBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	holdBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	ratioBuckets    = []float64{.1, .25, .5, .6, .7, .75, .8, .85, .9, .95, 1, 1.25, 1.5, 2, 5}
	renewalsBuckets = []float64{0, 1, 2, 3, 5, 10, 20, 50, 100, 300, 1000}
)

// Observer is a observe.Observer that records lock events as Prometheus
// metrics and a prometheus.Collector that exports them. One Observer may
// serve several Clients. It is safe for concurrent use.
type Observer struct {
	groups *observe.Groups
	slow   slowHolds
	pairs  sync.Map // pair: the (shape, group) pairs seen, whose counters exist

	acquire         *prometheus.CounterVec
	wait            *prometheus.HistogramVec
	hold            *prometheus.HistogramVec
	ratio           *prometheus.HistogramVec
	lost            *prometheus.CounterVec
	foundLost       *prometheus.CounterVec
	releaseFailures *prometheus.CounterVec
	renewals        *prometheus.CounterVec
	renewalFailures *prometheus.CounterVec
	leaseRenewals   *prometheus.HistogramVec
	held            *prometheus.GaugeVec
	slowHolds       *prometheus.CounterVec
}

var _ observe.Observer = (*Observer)(nil)
var _ prometheus.Collector = (*Observer)(nil)

// Option configures an Observer.
type Option func(*config) error

type config struct {
	namespace string
	group     func(string) string
	maxGroups int
	slowAfter time.Duration
	logger    *slog.Logger
}

var namespaceRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithNamespace sets the metric name prefix (default "dlock"); the alerts
// and the dashboard in deploy/ assume the default.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if !namespaceRE.MatchString(ns) {
			return fmt.Errorf("%w: namespace %q is not a metric name", dlock.ErrInvalidArgument, ns)
		}
		c.namespace = ns
		return nil
	}
}

// WithGroup sets the function that maps a lock name to its group label value
// (default observe.DefaultGroup). Whatever it returns, at most WithMaxGroups distinct
// values are used; an empty result becomes observe.NoGroup, invalid UTF-8 is
// replaced and values are cut to 64 bytes.
func WithGroup(f func(name string) string) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil group function", dlock.ErrInvalidArgument)
		}
		c.group = f
		return nil
	}
}

// WithMaxGroups limits the distinct group label values to n (default 100);
// names of further groups are recorded under observe.OtherGroup.
func WithMaxGroups(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max groups %d (want >= 1)", dlock.ErrInvalidArgument, n)
		}
		c.maxGroups = n
		return nil
	}
}

// WithSlowHold sets the slow-hold threshold (default 3 s); 0 turns slow-hold
// reports off. A hold kept by the watchdog is reported at its first renewal
// past the threshold, while it is still held; any other hold when it ends
// (its last Unlock, or its loss). Each hold is reported once: counted in
// dlock_slow_holds_total and, with WithLogger, logged.
func WithSlowHold(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: slow hold threshold %v", dlock.ErrInvalidDuration, d)
		}
		c.slowAfter = d
		return nil
	}
}

// WithLogger logs every slow hold at Warn: "dlock: slow hold" with name,
// shape, group, token (the fencing token, as `dlock inspect` shows it), held,
// threshold, renewals, state (held, released or lost), host and pid. Add
// your own attributes (service, replica) with logger.With. Without a logger
// the Observer never logs.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", dlock.ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// New returns an Observer. Register it with a prometheus.Registerer and pass
// it to dlock.Config.Observer (or another backend's Config).
func New(opts ...Option) (*Observer, error) {
	cfg := config{namespace: "dlock", group: observe.DefaultGroup, maxGroups: observe.DefaultMaxGroups, slowAfter: DefaultSlowHold}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, seam.WrapCall("new prometheus observer", err)
		}
	}
	host, _ := os.Hostname()
	ns := cfg.namespace
	labels := []string{"shape", "group"}
	with := func(extra ...string) []string { return append(append([]string{}, labels...), extra...) }
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, with(extra...))
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
	}
	return &Observer{
		groups: observe.NewGroups(cfg.group, cfg.maxGroups),
		slow:   slowHolds{after: cfg.slowAfter, logger: cfg.logger, host: host, pid: os.Getpid(), warned: make(map[holdKey]struct{})},

		acquire: counter("acquire_total", "Acquire calls by result (acquired, not_acquired, error): the acquire-failure rate.", "result"),
		wait:    histogram("acquire_wait_seconds", "Time successful Acquire calls took, waiting included.", waitBuckets),
		hold:    histogram("hold_seconds", "Time from grant to Unlock, observed at every Unlock (also one that found the lock lost).", holdBuckets),
		ratio: histogram("hold_lease_ratio", "Hold time divided by the fixed lease, at Unlock of a fixed lease; "+
			"a P99 near 1 means the lease is too short.", ratioBuckets),
		lost:      counter("lost_total", "Holds lost while held, by reason (expired, deleted_or_taken, unreachable, max_hold, closed): any is an incident.", "reason"),
		foundLost: counter("unlock_found_lost_total", "Unlocks that found the lock no longer ours: the section ran without exclusivity."),
		releaseFailures: counter("release_failures_total", "Unlocks whose release failed (store error or timeout): "+
			"the lock may stay held in the store until its lease runs out."),
		renewals: counter("renewals_total", "Successful watchdog renewals."),
		renewalFailures: counter("renewal_failures_total", "Watchdog renewals that failed (Redis error or timeout); "+
			"the lease is lost if none succeeds before it runs out."),
		leaseRenewals: histogram("lease_renewals", "Watchdog renewals per watchdog lease, observed when the lease ends; "+
			"a lease renewed many times is a worker stuck inside.", renewalsBuckets),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "held_leases",
			Help: "Leases currently held (acquired, neither unlocked nor lost)."}, labels),
		slowHolds: counter("slow_holds_total", "Holds that ran past the slow-hold threshold, counted once per hold."),
	}, nil
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.acquire, o.wait, o.hold, o.ratio, o.lost, o.foundLost, o.releaseFailures,
		o.renewals, o.renewalFailures, o.leaseRenewals, o.held, o.slowHolds}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// pair is one (shape, group) label pair.
type pair struct{ shape, group string }

// lostReasons are the LostReasons whose counters exist from the start.
var lostReasons = []observe.LostReason{observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable, observe.LostClosed, observe.LostMaxHold}

// group returns the group of name and, the first time a (shape, group) pair
// is seen, creates its counters at 0: the alerts' increase() then sees the
// first loss, unlock-found-lost or slow hold of the pair too.
func (o *Observer) group(shape, name string) string {
	g := o.groups.Of(name)
	p := pair{shape, g}
	if _, ok := o.pairs.Load(p); ok {
		return g
	}
	if _, loaded := o.pairs.LoadOrStore(p, struct{}{}); !loaded {
		for _, r := range []observe.AcquireResult{observe.Acquired, observe.NotAcquired, observe.AcquireErr} {
			o.acquire.WithLabelValues(shape, g, string(r))
		}
		for _, r := range lostReasons {
			o.lost.WithLabelValues(shape, g, string(r))
		}
		o.foundLost.WithLabelValues(shape, g)
		o.releaseFailures.WithLabelValues(shape, g)
		o.slowHolds.WithLabelValues(shape, g)
	}
	return g
}

// ObserveAcquire implements observe.Observer.
func (o *Observer) ObserveAcquire(ev observe.AcquireEvent) {
	g := o.group(ev.Shape, ev.Name)
	o.acquire.WithLabelValues(ev.Shape, g, string(ev.Result)).Inc()
	if ev.Result == observe.Acquired {
		o.wait.WithLabelValues(ev.Shape, g).Observe(ev.Wait.Seconds())
		o.held.WithLabelValues(ev.Shape, g).Inc()
	}
}

// ObserveRelease implements observe.Observer.
func (o *Observer) ObserveRelease(ev observe.ReleaseEvent) {
	g := o.group(ev.Shape, ev.Name)
	o.hold.WithLabelValues(ev.Shape, g).Observe(ev.Held.Seconds())
	if ev.Lease > 0 {
		o.ratio.WithLabelValues(ev.Shape, g).Observe(float64(ev.Held) / float64(ev.Lease))
	}
	if ev.FoundLost {
		o.foundLost.WithLabelValues(ev.Shape, g).Inc()
	}
	if ev.Err != nil {
		o.releaseFailures.WithLabelValues(ev.Shape, g).Inc()
	}
	if !ev.LostBefore { // a Lease lost before ended with its LostEvent
		o.held.WithLabelValues(ev.Shape, g).Dec()
		if ev.Lease == 0 {
			o.leaseRenewals.WithLabelValues(ev.Shape, g).Observe(float64(ev.Renewals))
		}
	}
	if ev.Last {
		k := holdKey{ev.Shape, ev.Name, ev.Token}
		if o.slow.ended(k, ev.Held, !ev.LostBefore) {
			o.reportSlow(ev.Shape, g, ev.Name, ev.Token, ev.Held, ev.Renewals, released)
		}
	}
}

// ObserveLost implements observe.Observer.
func (o *Observer) ObserveLost(ev observe.LostEvent) {
	g := o.group(ev.Shape, ev.Name)
	o.lost.WithLabelValues(ev.Shape, g, string(ev.Reason)).Inc()
	if ev.Leases > 0 {
		o.held.WithLabelValues(ev.Shape, g).Sub(float64(ev.Leases))
		if ev.Lease == 0 {
			h := o.leaseRenewals.WithLabelValues(ev.Shape, g)
			for range ev.Leases {
				h.Observe(float64(ev.Renewals))
			}
		}
	}
	// Leases == 0: an Unlock found the loss and its ReleaseEvent already
	// ended the hold (and checked it for slowness).
	if o.slow.ended(holdKey{ev.Shape, ev.Name, ev.Token}, ev.Held, ev.Leases > 0) {
		o.reportSlow(ev.Shape, g, ev.Name, ev.Token, ev.Held, ev.Renewals, lost)
	}
}

// ObserveRenewal implements observe.Observer.
func (o *Observer) ObserveRenewal(ev observe.RenewalEvent) {
	g := o.group(ev.Shape, ev.Name)
	if !ev.OK {
		o.renewalFailures.WithLabelValues(ev.Shape, g).Inc()
		return
	}
	o.renewals.WithLabelValues(ev.Shape, g).Inc()
	if o.slow.renewed(holdKey{ev.Shape, ev.Name, ev.Token}, ev.Held) {
		o.reportSlow(ev.Shape, g, ev.Name, ev.Token, ev.Held, ev.Renewals, stillHeld)
	}
}

func (o *Observer) reportSlow(shape, group, name string, token int64, held time.Duration, renewals int, state slowState) {
	o.slowHolds.WithLabelValues(shape, group).Inc()
	o.slow.log(shape, group, name, token, held, renewals, state)
}
