package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// session is one lease of the Client in etcd. Every key the Client writes
// without LeaseTime is attached to it, so the keys of a Client that stops
// renewing disappear when etcd expires the lease.
type session struct {
	id   clientv3.LeaseID
	hex  string        // id in hex and "-": the start of its keys' holder part
	ttl  time.Duration // as granted by etcd
	keep time.Duration // how long past a confirmed keepalive it is held: ttl less the election margin (margin.go)
	done chan struct{} // closed when the session ended

	mu    sync.Mutex
	sent  time.Time // when the last confirmed grant or keepalive was sent
	ended bool
}

// confirmed returns when the last confirmed renewal was sent: the cluster
// keeps the lease until at least that moment plus keep (margin.go).
func (s *session) confirmed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// deadline is when the session must be taken as gone on the local clock.
func (s *session) deadline() time.Time {
	return seam.LeaseEnd(s.confirmed(), s.keep)
}

// alive reports whether the session has not ended and its deadline has not
// passed.
func (s *session) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended && time.Now().Before(seam.LeaseEnd(s.sent, s.keep))
}

// confirm records a renewal sent at sent; false if the session has ended
// or its deadline passed before the confirmation came.
func (s *session) confirm(sent time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || !time.Now().Before(seam.LeaseEnd(s.sent, s.keep)) {
		return false
	}
	if sent.After(s.sent) {
		s.sent = sent
	}
	return true
}

// end marks the session ended; false if it already was.
func (s *session) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.ended = true
	close(s.done)
	return true
}

// session returns the Client's live session, granting a new lease when
// there is none (the first acquisition, or the last session ended).
func (c *Client) session(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		closed, s := c.closed, c.sess
		c.mu.Unlock()
		if closed {
			return nil, dlock.ErrClosed
		}
		if s != nil {
			if s.alive() {
				return s, nil
			}
			c.endSession(s, observe.LostUnreachable, true)
			continue
		}
		select {
		case c.grants <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s, err := c.grantSession(ctx)
		<-c.grants
		if s != nil || err != nil {
			return s, err
		}
	}
}

// grantSession grants a new session lease unless another caller did while
// this one waited its turn (then it returns nil, nil).
func (c *Client) grantSession(ctx context.Context) (*session, error) {
	c.mu.Lock()
	cur := c.sess
	c.mu.Unlock()
	if cur != nil {
		return nil, nil
	}
	m, err := c.minLeaseTTL(ctx)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	resp, err := c.cli.Grant(ctx, seconds(c.ttl))
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s := &session{id: resp.ID, hex: strconv.FormatInt(int64(resp.ID), 16) + "-", ttl: ttl, keep: ttl - electionMargin(m), sent: sent, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = c.cli.Revoke(rctx, s.id)
		return nil, dlock.ErrClosed
	}
	c.sess = s
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	c.background(c.sweepOrphans)
	return s, nil
}

// seconds returns d in whole seconds, rounded up.
func seconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// endSession ends s: every hold kept by it is lost with reason, waiters on
// it queue again, and (with revoke) the lease is revoked in the
// background, so keys of holders that were told they lost are gone from
// etcd too.
func (c *Client) endSession(s *session, reason observe.LostReason, revoke bool) {
	if !s.end() {
		return
	}
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
	}
	c.mu.Unlock()
	c.keeper.LoseSession(s, reason)
	if revoke {
		c.background(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, s.ttl)
			defer cancel()
			for ctx.Err() == nil {
				if _, err := c.cli.Revoke(ctx, s.id); err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
					return
				}
				sleep(ctx, 200*time.Millisecond)
			}
		})
	}
}

// sessionGone ends s and reports true if err says etcd no longer has its
// lease (a write attached to it was refused).
func (c *Client) sessionGone(s *session, err error) bool {
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false
	}
	c.endSession(s, observe.LostExpired, false)
	return true
}

// keepalive renews the current session every TTL/3 (sooner again after a
// failure) until Close.
func (c *Client) keepalive() {
	failed := false
	for {
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s == nil {
			select {
			case <-c.kick:
				continue
			case <-c.bg.Done():
				return
			}
		}
		next := time.Until(s.confirmed().Add(s.ttl / 3))
		if failed {
			next = min(next, retryEvery(s.ttl))
		}
		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-s.done:
			t.Stop()
			continue
		case <-c.bg.Done():
			t.Stop()
			return
		}
		failed = !c.renew(s)
	}
}

// retryEvery is how soon a failed keepalive is tried again.
func retryEvery(ttl time.Duration) time.Duration { return min(ttl/10, 500*time.Millisecond) }

// renew sends one keepalive for s. On success every hold of s is renewed
// and the holds' keys are checked; when etcd says the lease is gone, or
// the session's deadline passes with no confirmation, the session ends.
// It returns false if the keepalive failed.
func (c *Client) renew(s *session) bool {
	deadline := s.deadline()
	if !time.Now().Before(deadline) {
		c.endSession(s, observe.LostUnreachable, true)
		return true
	}
	// One attempt is bounded well inside the deadline, so that a call stuck
	// on a dead connection leaves time for another on a live one.
	until := time.Now().Add(max(s.ttl/5, 200*time.Millisecond))
	if deadline.Before(until) {
		until = deadline
	}
	ctx, cancel := context.WithDeadline(c.bg, until)
	sent := time.Now()
	resp, err := c.cli.KeepAliveOnce(ctx, s.id)
	cancel()
	switch {
	case c.bg.Err() != nil:
		return true
	case err == nil && resp.TTL > 0:
		if !s.confirm(sent) {
			c.endSession(s, observe.LostUnreachable, true)
			return true
		}
		// Every hold of s is kept by its lease, which the cluster keeps
		// until at least sent + keep (margin.go): also one granted while
		// the keepalive was in flight.
		c.keeper.RenewSession(s, sent, s.keep)
		c.checkKeys(c.keeper.Session(s))
		return true
	case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
		c.endSession(s, observe.LostExpired, false)
		return true
	default:
		for _, h := range c.keeper.Session(s) {
			h.RenewFailed(err)
		}
		if !time.Now().Before(s.deadline()) {
			c.endSession(s, observe.LostUnreachable, true)
		}
		return false
	}
}

// checkKeys reads the keys of holds (up to 64 keys per read) and loses
// every hold one of whose keys is gone or was replaced: a lock deleted
// behind its holder's back is reported at the next renewal. A failed read
// changes nothing.
func (c *Client) checkKeys(holds []*seam.Hold[*grantOps]) {
	for len(holds) > 0 {
		var batch []*seam.Hold[*grantOps]
		var ops []clientv3.Op
		for len(holds) > 0 && (len(ops) == 0 || len(ops)+len(holds[0].Ops().keys) <= 64) {
			h := holds[0]
			holds = holds[1:]
			batch = append(batch, h)
			for _, k := range h.Ops().keys {
				ops = append(ops, clientv3.OpGet(k, clientv3.WithKeysOnly()))
			}
		}
		ctx, cancel := context.WithTimeout(c.bg, c.ttl/3)
		resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return
		}
		i := 0
		for _, h := range batch {
			gone := false
			for range h.Ops().keys {
				kvs := resp.Responses[i].GetResponseRange().GetKvs()
				gone = gone || len(kvs) == 0 || kvs[0].CreateRevision != h.Token()
				i++
			}
			if gone {
				h.Lose(observe.LostDeletedOrTaken)
			}
		}
	}
}

// isCtxErr reports whether err is a context's end, as etcd's client returns
// it.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
