package etcdlock

import (
	"context"
	"time"
)

// How long past a confirmed keepalive the client may hold its session,
// whatever the network does inside the cluster.
//
// etcd's leader alone keeps leases. A keepalive confirmed by the leader
// means it kept the lease for its TTL from then, but a leader cut off from
// its followers goes on confirming keepalives until it steps down: its
// leadership check (ensureLeadership) is skipped while the member ticks,
// and raft's CheckQuorum steps it down only at the second check without a
// quorum, up to two election timeouts (and a tick) after the cut. The
// majority elects a new leader at the earliest one election timeout less
// two heartbeats after the cut (a follower's timer starts at the last
// heartbeat it had, and counts in heartbeat ticks); once the new leader
// applies its first entry it extends every lease to that moment plus one
// election timeout plus the lease's TTL (lessor.Promote, with lease
// checkpoints off, etcd's default). A confirmation from the isolated leader
// can therefore outlast what the majority keeps by up to three heartbeat
// intervals.
//
// The client knows neither interval, but etcd grants no lease shorter than
// 1.5 election timeouts, rounded up to a whole second (a lease asked for
// 1 s comes back raised to it), and refuses an election timeout shorter
// than five heartbeats: from that minimum TTL m, a heartbeat is at most
// 2m/15, and three of them at most 2m/5. The client learns m once (one
// lease granted for 1 s and revoked at once, before its first session) and
// holds its session until a confirmed keepalive's send time plus the TTL
// less 2m/5 (less the drift allowance). The cost: a holder whose keepalives
// stop is told 2m/5 sooner — 800 ms with etcd's default 1 s election
// timeout (m = 2 s), 400 ms with a 500 ms one (m = 1 s); at the minimum TTL
// a session is held for 3/5 of its TTL past a keepalive.

// electionMargin is how much of a keepalive's TTL the client gives up,
// from the cluster's minimum lease TTL m.
func electionMargin(m time.Duration) time.Duration { return 2 * m / 5 }

// minLeaseTTL returns the cluster's minimum lease TTL, learned at the
// first call by granting a lease for 1 s (etcd raises it to its minimum)
// and revoking it.
func (c *Client) minLeaseTTL(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	m := c.minTTL
	c.mu.Unlock()
	if m > 0 {
		return m, nil
	}
	resp, err := c.cli.Grant(ctx, 1)
	if err != nil {
		return 0, err
	}
	if _, err := c.cli.Revoke(ctx, resp.ID); err != nil {
		c.revokeLater(resp.ID) // nothing is on it; it expires within m anyway
	}
	m = time.Duration(resp.TTL) * time.Second
	c.mu.Lock()
	c.minTTL = m
	c.mu.Unlock()
	return m, nil
}

// margin returns the election margin of the cluster. Every hold has it:
// its keys were queued on a session, which learned the minimum TTL first.
func (c *Client) margin() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return electionMargin(c.minTTL)
}
