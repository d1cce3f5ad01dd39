// Package backend opens the lock service the drills and the sale run on —
// Redis, etcd or ZooKeeper — and hands out one lock client per actor, so a
// drill written against dlock.Locker runs unchanged on each of them.
package backend

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
)

// The backends.
const (
	Redis     = "redis"
	Etcd      = "etcd"
	ZooKeeper = "zookeeper"
)

var (
	// ErrUnknown wraps a backend name Open does not know.
	ErrUnknown = errors.New("unknown backend")
	// ErrUnreachable wraps a server the caller named that does not answer
	// (a runtime failure: the command exits 1).
	ErrUnreachable = errors.New("unreachable")
	// ErrBadAddress wraps an address Open cannot read (bad input: the
	// command exits 2).
	ErrBadAddress = errors.New("bad address")
)

// ClientOptions configure one actor's client.
type ClientOptions struct {
	// Label names the actor in the holder metadata where the backend keeps
	// it (Redis's Inspect).
	Label string
	// Observer receives the client's lock events; nil for none.
	Observer observe.Observer
	// Session is how long the service keeps the client's renewed locks
	// without a sign of life: the watchdog timeout on Redis, the session
	// lease's TTL on etcd, the session timeout on ZooKeeper (each server
	// may round it up to its minimum). 0: the backend's default.
	Session time.Duration
	// Prefix is where the locks live: the key prefix on Redis
	// (dlock.Config.Prefix) and etcd (etcdlock.Config.Prefix), the root
	// znode on ZooKeeper (zklock.Config.Prefix). "": the backend's default.
	// Clients that share locks must share it.
	Prefix string
}

// Client is one actor's connection to the lock service. Its lockers are
// dlock.Lockers returning *dlock.Lease, the same on every backend.
type Client interface {
	// Mutex returns the non-reentrant exclusive lock name.
	Mutex(name string) dlock.Locker
	// Lock returns the reentrant exclusive lock name.
	Lock(name string) dlock.Locker
	// Inspect reads who holds the lock name, of any shape, without
	// changing it (the same meaning of every field of dlock.Info on every
	// backend).
	Inspect(ctx context.Context, name string) (dlock.Info, error)
	// List returns the held locks whose names match pattern, a Redis glob
	// ("" is "*"), oldest first, each read as Inspect reads it (the
	// contract of dlock.Client.List, found the way each store allows:
	// SCAN on Redis, a keys-only read on etcd, the family directories'
	// children on ZooKeeper).
	List(ctx context.Context, pattern string) ([]dlock.Info, error)
	// NewLister returns a Lister of the client's locks, for a caller that
	// lists again and again (a live view): it reads again only what
	// changed (dlock.Lister on Redis, kept current by a watch on etcd and
	// by watches on ZooKeeper).
	NewLister() Lister
	// Session is how long the service keeps this client's renewed locks
	// past its last sign of life, as the client holds them: the watchdog
	// timeout on Redis, the session lease's TTL on etcd (in whole seconds
	// rounded up, as etcd counts it; a server whose minimum TTL is longer
	// raises it), the negotiated session timeout on ZooKeeper.
	Session() time.Duration
	// Close releases what the client still holds (reported lost to its
	// holders) and closes its connections.
	Close() error
}

// Lister is List again and again: each List returns what Client.List
// returns.
type Lister interface {
	List(ctx context.Context, pattern string) ([]dlock.Info, error)
	// Foreign returns what the last List found under the prefix that is no
	// lock (lock names on Redis, keys or nodes under the prefix elsewhere).
	Foreign() []string
	// Close ends the Lister (its watches); a List after it fails.
	Close() error
}

// Backend is an open lock service. Its methods are safe for concurrent use.
type Backend struct {
	// Kind is Redis, Etcd or ZooKeeper.
	Kind string
	// Addr is what a client (in this process or another) connects to: a
	// Redis URL, or comma-separated host:port endpoints for etcd and
	// ZooKeeper. Open(ctx, Kind, Addr) in a child process reaches the same
	// service.
	Addr string
	// Desc says what the service is, for the first line of a drill's output.
	Desc string
	// Embedded is true when Open started the server (and Close stops it):
	// no address was given.
	Embedded bool

	newClient func(ctx context.Context, o ClientOptions) (Client, error)
	close     func() error
	closeOnce sync.Once
	closeErr  error
}

// Open returns the backend kind at addr (checked to answer within a few
// seconds; an error wrapping ErrUnreachable if it does not, ErrBadAddress if
// addr cannot be read), or, when addr is empty, a server started for the caller on free loopback ports and
// stopped by Close: a redis-server from PATH (else an in-process miniredis),
// an etcd member, a ZooKeeper server. kind "" means Redis.
func Open(ctx context.Context, kind, addr string) (*Backend, error) {
	s, err := Lookup(kind)
	if err != nil {
		return nil, err
	}
	b, err := s.open(ctx, addr)
	if err != nil {
		return nil, err
	}
	b.Embedded = addr == ""
	return b, nil
}

// NewClient returns a new client on the service, for one actor.
func (b *Backend) NewClient(ctx context.Context, o ClientOptions) (Client, error) {
	if o.Session < 0 {
		return nil, fmt.Errorf("%w: negative session %v", dlock.ErrInvalidDuration, o.Session)
	}
	return b.newClient(ctx, o)
}

// Close stops the server if Open started it. It is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		if b.close != nil {
			b.closeErr = b.close()
		}
	})
	return b.closeErr
}

// AddrError is an address Open cannot read (Err is ErrBadAddress) or a
// server there that does not answer (Err is ErrUnreachable). Its text is
// the command's error format: `connect etcd "127.0.0.1:1": unreachable: no
// answer within 3s`, `etcd address "x": bad address: "x" is not host:port`.
type AddrError struct {
	Kind string // Redis, Etcd or ZooKeeper
	Addr string // as given (a Redis URL's password hidden)
	Err  error  // ErrBadAddress or ErrUnreachable
	// Reason is the cause, without the address or the operation (Cause).
	Reason string
}

func (e *AddrError) Error() string {
	if errors.Is(e.Err, ErrBadAddress) {
		return fmt.Sprintf("%s address %q: %v: %s", e.Kind, e.Addr, e.Err, e.Reason)
	}
	return fmt.Sprintf("connect %s %q: %v: %s", e.Kind, e.Addr, e.Err, e.Reason)
}

func (e *AddrError) Unwrap() error { return e.Err }

// badAddress returns the AddrError of an address that cannot be read.
func badAddress(kind, addr, reason string) error {
	return &AddrError{Kind: kind, Addr: Redact(addr), Err: ErrBadAddress, Reason: reason}
}

// unreachable returns the AddrError of a server at addr that did not
// answer: err says why, read by Cause.
func unreachable(kind, addr string, err error) error {
	return &AddrError{Kind: kind, Addr: Redact(addr), Err: ErrUnreachable, Reason: Cause(err, addr)}
}

// checkFailed is the error of a server check (run under pctx, a bound
// on ctx) that failed with err: ctx's own error if the caller gave up,
// else an unreachable AddrError, its cause the check's deadline when that
// ran out.
func checkFailed(ctx, pctx context.Context, kind, addr string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pctx.Err() != nil { // the check's own deadline
		err = pctx.Err()
	}
	return unreachable(kind, addr, err)
}

// Cause returns err's text without what the caller's own message says
// already: the "dlock: " a library puts in front, and every ": "-separated
// part that names one of addrs (or a host:port inside them) — a library's
// "connecting to ZooKeeper at 127.0.0.1:1", go-redis's "dial tcp
// 127.0.0.1:1". A deadline that ran out reads "no answer within" the
// check's bound.
func Cause(err error, addrs ...string) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %v", pingTimeout)
	}
	var names []string
	for _, a := range addrs {
		for _, part := range strings.Split(a, ",") {
			part = strings.TrimSpace(part)
			if u, perr := url.Parse(part); perr == nil && u.Host != "" {
				names = append(names, u.Host)
			}
			if part != "" {
				names = append(names, part)
			}
		}
	}
	var keep []string
	// "dlock: " goes before the parts are matched (a lone "dlock" part would
	// be kept, and "no answer" lost); a colon left at the end is
	// errline.Clean's, when the line is printed.
	for _, p := range strings.Split(strings.ReplaceAll(err.Error(), "dlock: ", ""), ": ") {
		if p = strings.TrimSpace(p); p == "" || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(p, n) }) {
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		return "no answer"
	}
	return strings.Join(keep, ": ")
}

// CheckAddr reads addr as Open would for kind, without connecting: an
// AddrError wrapping ErrBadAddress if it cannot; "" (the embedded
// default) is fine.
func CheckAddr(kind, addr string) error {
	if addr == "" {
		return nil
	}
	s, err := Lookup(kind)
	if err != nil {
		return err
	}
	return s.check(addr)
}

// splitAddrs reads the comma-separated host:port endpoints of a kind of
// server; an error is an AddrError wrapping ErrBadAddress.
func splitAddrs(kind, addr string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		a = strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "zk://")
		if a == "" {
			continue
		}
		if !strings.Contains(a, ":") {
			if a == strings.TrimSpace(addr) {
				return nil, badAddress(kind, addr, "want host:port")
			}
			return nil, badAddress(kind, addr, fmt.Sprintf("%q is not host:port", a))
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, badAddress(kind, addr, "no host:port given")
	}
	return out, nil
}

// pingTimeout bounds the check that a named server answers.
const pingTimeout = 3 * time.Second
