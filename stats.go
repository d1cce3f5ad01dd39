package dlock

// Stats is a snapshot of a Client's own bookkeeping.
type Stats struct {
	Holds             int   // locks held through this Client (reentrant holds count once)
	Watched           int   // of those, kept by the watchdog
	RenewalRoundTrips int64 // pipelines the watchdog has sent since New
	// GiveBackErrors counts the releases the Client sent on its own that
	// failed since New: of a grant nobody would hold (it arrived late, or
	// after its Acquire gave up or the Client closed), of a lease at its
	// MaxHold, and Close's. Each left a lock held in Redis until its lease
	// ran out. (An Unlock's failed release is its error, and the
	// Observer's ReleaseEvent.Err.)
	GiveBackErrors int64
	// SubscribeErrors counts the SUBSCRIBE and UNSUBSCRIBE calls of the
	// pub/sub connection that failed since New (Redis unreachable while
	// the connection was re-established). go-redis subscribes again when
	// it reconnects; meanwhile the waiters of those locks wake on their
	// timers, not at a release.
	SubscribeErrors int64
}

// Stats returns a snapshot of the Client's bookkeeping.
func (c *Client) Stats() Stats {
	n, w := c.keeper.Count()
	return Stats{Holds: n, Watched: w, RenewalRoundTrips: c.wd.roundTrips.Load(),
		GiveBackErrors: c.keeper.GiveBackErrors(), SubscribeErrors: c.sub.errs.Load()}
}
