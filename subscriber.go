package dlock

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/ids"

	"github.com/redis/go-redis/v9"
)

// subscriber is the Client's one pub/sub connection. Waiters join a lock's
// wake-up channel (reference-counted: the channel is subscribed while anyone
// waits on it). A release message wakes the longest-waiting local waiter
// ("1"), all of them ("a"), or, as "op|fence|ttl-ms", hands the lock to the
// waiter whose id is op (a queued lock's hand-off, on this Client's own
// channel); each (re)confirmed subscription wakes all of the channel's
// waiters, so a release published while the subscription was being set up
// or the connection was down is never waited out.
//
// A waiter that listens subscribes its channel as it joins. A waiter joins after
// its first refused attempt: a hand-off that reaches an already subscribed
// channel before its waiter joined is kept for missedWindow and given to the
// waiter when it joins. A channel stays subscribed for subscriptionLinger
// after its last waiter left, so the waiters of a hot lock find it subscribed
// instead of paying SUBSCRIBE and UNSUBSCRIBE (and a confirmation wake-up) on
// every acquisition. A release message ("1", "a")
// that finds such a channel without waiters is kept for missedWindow and
// wakes the next waiter to join: it may have been refused just before the
// release and joined just after the message.
//
// No network call is made under mu: SUBSCRIBE and UNSUBSCRIBE are sent by
// one goroutine (run) that also owns the connection, so a join, a leave and
// the reader never wait for a connection that is being re-established (a
// slow or dead server, CLIENT KILL, a failover), and neither does an
// Acquire past its deadline: its waiter waits on its timer and ctx, and the
// subscription's confirmation wakes it when it comes. A SUBSCRIBE that
// fails is counted (Stats.SubscribeErrors) and sent again by go-redis when
// it reconnects.
type subscriber struct {
	rdb    redis.UniversalClient
	bg     context.Context // cancelled by Close: a call still trying to connect gives up
	logger *slog.Logger    // nil: failures are not logged
	id     string          // this Client's id in per-Client channel names (lock wake + ":" + id)

	mu     sync.Mutex
	chans  map[string]*wakeChannel
	want   map[string]bool // subscriptions to change (true: SUBSCRIBE, false: UNSUBSCRIBE), for run
	done   chan struct{}   // closed when run and the reader have exited; nil until run starts
	closed bool

	kick     chan struct{} // want changed, or the subscriber closed
	errs     atomic.Int64  // SUBSCRIBE and UNSUBSCRIBE calls that failed
	closeErr error         // the pub/sub connection's Close's, once done is closed
}

// subscriptionLinger is how long an idle channel stays subscribed;
// missedWindow how long a release message it got stays for the next waiter.
const (
	subscriptionLinger = 2 * time.Second
	missedWindow       = time.Second
)

type wakeChannel struct {
	waiters    []*waiter   // in arrival order
	subscribed bool        // SUBSCRIBE sent
	idle       *time.Timer // unsubscribes the channel; set while it has no waiters
	missed     time.Time   // when a release message found no waiter
	early      map[string]earlyHandoff
}

// handoff is a hand-off message's grant.
type handoff struct {
	fence int64
	ttl   time.Duration
}

// earlyHandoff is a hand-off that arrived before its waiter joined.
type earlyHandoff struct {
	h  handoff
	at time.Time
}

// parseHandoff reads "op|fence|ttl-ms"; ok is false for any other payload.
func parseHandoff(payload string) (op string, h handoff, ok bool) {
	op, rest, _ := strings.Cut(payload, "|")
	f, t, found := strings.Cut(rest, "|")
	fence, err1 := strconv.ParseInt(f, 10, 64)
	ttl, err2 := strconv.ParseInt(t, 10, 64)
	if !found || err1 != nil || err2 != nil || ttl <= 0 {
		return op, h, false
	}
	return op, handoff{fence: fence, ttl: time.Duration(ttl) * time.Millisecond}, true
}

// waiter is one Acquire call waiting for a lock.
type waiter struct {
	channel string
	id      string        // the Acquire call's operation id: targeted payloads
	wake    chan struct{} // buffered: one pending wake-up at most
	handed  *handoff      // a hand-off not yet taken (under subscriber.mu)
}

func newSubscriber(bg context.Context, rdb redis.UniversalClient, logger *slog.Logger) *subscriber {
	return &subscriber{rdb: rdb, bg: bg, logger: logger, id: ids.Op(), chans: make(map[string]*wakeChannel), want: make(map[string]bool), kick: make(chan struct{}, 1)}
}

// join registers a waiter with id on channel, and subscribes the channel
// if listen is true and it is not subscribed yet.
func (s *subscriber) join(channel, id string, listen bool) *waiter {
	w := &waiter{channel: channel, id: id, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return w // never woken by messages; its timer still runs
	}
	wc := s.chans[channel]
	if wc == nil {
		wc = &wakeChannel{}
		s.chans[channel] = wc
	}
	if listen && !wc.subscribed {
		wc.subscribed = true
		s.change(channel, true)
	}
	if wc.idle != nil {
		wc.idle.Stop()
		wc.idle = nil
	}
	if !wc.missed.IsZero() && time.Since(wc.missed) < missedWindow {
		w.signal()
	}
	wc.missed = time.Time{}
	if e, ok := wc.early[id]; ok {
		delete(wc.early, id)
		if time.Since(e.at) < missedWindow {
			w.handed = &e.h
			w.signal()
		}
	}
	wc.waiters = append(wc.waiters, w)
	return w
}

// wakeLocal wakes the longest-waiting waiter on channel without any message
// from Redis: a release made through this Client (RedLock).
func (s *subscriber) wakeLocal(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wc := s.chans[channel]; wc != nil {
		wc.wakeOne(nil)
	}
}

// signal gives w a wake-up unless it has one pending; false if it had.
func (w *waiter) signal() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// handed takes the hand-off w was given, if any and if usable says it can
// be used; a hand-off taken also ends w's wait (w leaves its channel, as
// leave does for an acquired lock). An unusable one is dropped.
func (s *subscriber) handed(w *waiter, usable func(handoff) bool) (handoff, bool) {
	if w == nil {
		return handoff{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := w.handed
	w.handed = nil
	if h == nil || !usable(*h) {
		return handoff{}, false
	}
	s.remove(w, true)
	return *h, true
}

// change asks run to subscribe channel (on) or unsubscribe it, starting
// run on first use; s.mu is held.
func (s *subscriber) change(channel string, on bool) {
	s.want[channel] = on
	if s.done == nil {
		s.done = make(chan struct{})
		go s.run(s.done)
	}
	s.signal()
}

// signal wakes run.
func (s *subscriber) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run owns the pub/sub connection: it sends the subscriptions join and
// expire ask for, in the order asked, until the subscriber closes; then it
// closes the connection and waits for the reader. A failed call is not
// fatal: go-redis reconnects and resubscribes every channel it was asked
// for, and waiters also wake on their timers.
func (s *subscriber) run(done chan struct{}) {
	var ps *redis.PubSub
	var read chan struct{} // closed when the reader exits
	defer func() {
		if ps != nil {
			err := ps.Close()
			<-read
			s.mu.Lock()
			s.closeErr = err
			s.mu.Unlock()
		}
		close(done)
	}()
	ctx := s.bg
	for range s.kick {
		s.mu.Lock()
		closed := s.closed
		var want map[string]bool // run's alone: s.want is read under s.mu only
		if len(s.want) > 0 {
			want, s.want = s.want, make(map[string]bool)
		}
		s.mu.Unlock()
		if closed {
			return
		}
		var sub, unsub []string
		for channel, on := range want {
			if on {
				sub = append(sub, channel)
			} else {
				unsub = append(unsub, channel)
			}
		}
		if ps == nil {
			if len(sub) == 0 {
				continue
			}
			ps = s.rdb.Subscribe(ctx)
			read = make(chan struct{})
			go s.read(ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)), read)
		}
		if len(unsub) > 0 {
			s.failed("unsubscribe", unsub, ps.Unsubscribe(ctx, unsub...))
		}
		if len(sub) > 0 {
			s.failed("subscribe", sub, ps.Subscribe(ctx, sub...))
		}
	}
}

// failed counts and logs (Debug) a pub/sub call that failed with err.
func (s *subscriber) failed(op string, channels []string, err error) {
	if err == nil || s.bg.Err() != nil {
		return
	}
	s.errs.Add(1)
	if s.logger != nil {
		s.logger.Debug("dlock: "+op+" failed", "channels", channels, "err", err)
	}
}

// leave removes w. A waiter that leaves without the lock wakes the next one,
// so a wake-up it took (or was about to take) is never lost.
func (s *subscriber) leave(w *waiter, acquired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(w, acquired)
}

// remove is leave with s.mu held.
func (s *subscriber) remove(w *waiter, acquired bool) {
	wc := s.chans[w.channel]
	if wc == nil {
		return
	}
	for i, x := range wc.waiters {
		if x == w {
			wc.waiters = append(wc.waiters[:i], wc.waiters[i+1:]...)
			break
		}
	}
	if len(wc.waiters) == 0 {
		if !wc.subscribed || s.closed {
			delete(s.chans, w.channel)
		} else if wc.idle == nil {
			wc.idle = time.AfterFunc(subscriptionLinger, func() { s.expire(w.channel, wc) })
		}
		return
	}
	if !acquired {
		wc.wakeOne(nil)
	}
}

// expire unsubscribes wc's channel if it is still idle.
func (s *subscriber) expire(channel string, wc *wakeChannel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.chans[channel] != wc || len(wc.waiters) > 0 {
		return
	}
	delete(s.chans, channel)
	s.change(channel, false)
}

// pass hands a wake-up w could not use on to the next local waiter.
func (s *subscriber) pass(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wc := s.chans[w.channel]; wc != nil {
		wc.wakeOne(w)
	}
}

// wait blocks until a wake-up, d elapsed, ctx is done (its error), or
// closed is closed (ErrClosed). A nil waiter (no channel to listen on)
// waits on the timer only.
func (w *waiter) wait(ctx context.Context, closed <-chan struct{}, d time.Duration) error {
	var wake <-chan struct{}
	if w != nil {
		wake = w.wake
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	}
}

// wakeOne wakes the longest-waiting waiter other than except that has no
// wake-up pending.
func (wc *wakeChannel) wakeOne(except *waiter) {
	for _, w := range wc.waiters {
		if w == except {
			continue
		}
		if w.signal() {
			return
		}
	}
}

// handTo gives h to the waiter whose id is op and wakes it; a hand-off that
// finds no such waiter is kept for one that joins within missedWindow.
func (wc *wakeChannel) handTo(op string, h handoff) {
	for _, w := range wc.waiters {
		if w.id == op {
			w.handed = &h
			w.signal()
			return
		}
	}
	now := time.Now()
	for id, e := range wc.early {
		if now.Sub(e.at) >= missedWindow {
			delete(wc.early, id)
		}
	}
	if wc.early == nil {
		wc.early = make(map[string]earlyHandoff)
	}
	wc.early[op] = earlyHandoff{h: h, at: now}
}

func (wc *wakeChannel) wakeAll() {
	for _, w := range wc.waiters {
		w.signal()
	}
}

func (s *subscriber) read(msgs <-chan any, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		s.mu.Lock()
		switch m := m.(type) {
		case *redis.Message:
			if wc := s.chans[m.Channel]; wc != nil {
				switch m.Payload {
				case "a", "1":
					if len(wc.waiters) == 0 {
						wc.missed = time.Now()
					} else if m.Payload == "a" {
						wc.wakeAll()
					} else {
						wc.wakeOne(nil)
					}
				default: // a hand-off; any other payload is not ours
					if op, h, ok := parseHandoff(m.Payload); ok {
						wc.handTo(op, h)
					}
				}
			}
		case *redis.Subscription:
			if wc := s.chans[m.Channel]; wc != nil && m.Kind == "subscribe" {
				wc.wakeAll()
			}
		}
		s.mu.Unlock()
	}
}

// stop wakes every waiter and tells run to close the pub/sub connection.
func (s *subscriber) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, wc := range s.chans {
		if wc.idle != nil {
			wc.idle.Stop()
		}
		wc.wakeAll()
	}
	s.signal()
}

// wait waits until run has closed the connection, or ctx is done (a
// connection being re-established holds go-redis's lock until its dial
// gives up), and returns the connection's Close's error.
func (s *subscriber) wait(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeErr
}
