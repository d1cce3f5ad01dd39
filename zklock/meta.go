package zklock

import (
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// Every node carries its holder's metadata as its data, for Inspect:
//
//	shape|owner|permits|lease-ms|host|pid|queued-at-ms|label
//
// shape is the request's ("mutex", "lock", "rw_read", "rw_write",
// "semaphore", "multi"); owner is a reentrant shape's owner ("" for a
// Mutex or a Semaphore); permits a Semaphore's permit count (0 for the
// others); lease-ms how long the hold outlives its holder's last sign of
// life (a fixed lease no longer than the session timeout, else the session
// timeout); queued-at-ms when the node was made, on the holder's clock.

// nodeData returns the data of r's nodes, queued now with options o.
func (c *Client) nodeData(r *request, o seam.Options) []byte {
	lease := c.timeout
	if o.Lease > 0 && o.Lease <= c.timeout {
		lease = o.Lease
	}
	b := make([]byte, 0, 64+len(r.owner)+len(c.meta)+len(c.label))
	b = append(b, r.shape...)
	b = append(b, '|')
	b = append(b, r.nodeOwner()...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(r.permits), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, lease.Milliseconds(), 10)
	b = append(b, '|')
	b = append(b, c.meta...)
	b = append(b, '|')
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, '|')
	b = append(b, c.label...)
	return b
}

// nodeMeta is a node's data, read back.
type nodeMeta struct {
	shape, owner string
	permits      int
	lease        time.Duration
	host         string
	pid          int
	since        time.Time
	label        string
}

// parseMeta reads a node's data; a field it cannot read is left zero (a
// node of an older version, or written by someone else).
func parseMeta(data []byte) nodeMeta {
	f := strings.SplitN(string(data), "|", 8)
	for len(f) < 8 {
		f = append(f, "")
	}
	var m nodeMeta
	m.shape, m.owner, m.host, m.label = f[0], f[1], f[4], f[7]
	m.permits, _ = strconv.Atoi(f[2])
	if ms, err := strconv.ParseInt(f[3], 10, 64); err == nil {
		m.lease = time.Duration(ms) * time.Millisecond
	}
	m.pid, _ = strconv.Atoi(f[5])
	if ms, err := strconv.ParseInt(f[6], 10, 64); err == nil {
		m.since = time.UnixMilli(ms)
	}
	return m
}
