package etcdlock

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key layout, under the Client's prefix (default "dlock/"):
//
//	<prefix><kind>/<len(name)>:<name>/<holder>          mutex, lock, semaphore
//	<prefix>rw/<len(name)>:<name>/{r,w,d}/<holder>      read, write, downgrade
//	<prefix>permits/<len(name)>:<name>                  a Semaphore's count
//
// A MultiLock writes one key under the lock/ directory of each of its
// names. The length in front of the name keeps one lock's directory from
// being a prefix of another's ("a" and "a/b" are "1:a/" and "3:a/b/"). A
// holder is the session lease in hex and a slot, a small number of the
// Client's taken by one attempt and given back once its keys are known to
// be gone from etcd: a name is reused, never by two live keys at once.
// (etcd keeps every key name ever written, deleted or not, in its index
// until the next compaction, and a read of a lock's directory walks them
// all: a new name per acquisition made every acquisition of a busy lock
// slower than the one before, by about 200 µs per 3000 acquisitions.)
// Every write to a key is conditional on its create revision, so a retried
// or late release never deletes a later acquisition under the same name;
// the one exception, a grant's first release, relies on the slot rule
// (see grantOps.Release).
//
// A key's value is its holder's metadata, which Inspect reads:
//
//	<id>|<q>|<permits>|<host>|<pid>|<written-ms>|<label>
//
// id is the owner of a reentrant shape and a random id of the acquisition
// otherwise;
// q is "q" while the key waits on a lease of its own (QueueTimeout), ""
// otherwise; permits is a Semaphore's count ("" for the other shapes);
// written-ms is when the key was written (Unix ms, the writer's clock).

// dir returns the key directory of the lock of kind called name.
func (c *Client) dir(kind, name string) string {
	return c.prefix + kind + "/" + strconv.Itoa(len(name)) + ":" + name + "/"
}

// permitsKey returns the key of the permit count of the Semaphore called
// name: its value is the count in decimal, set by the first acquisition (or
// SetPermits), on no lease.
func (c *Client) permitsKey(name string) string {
	return c.prefix + "permits/" + strconv.Itoa(len(name)) + ":" + name
}

// holderKey returns the key in dir of slot on session s.
func holderKey(dir string, s *session, slot int) string {
	return dir + s.hex + strconv.Itoa(slot)
}

// slots hands out the slots of a Client's keys: the smallest free one.
type slots struct {
	mu   sync.Mutex
	free []int // given back, the smallest last
	next int   // never handed out from here on
}

// take returns a slot no live key of the Client has.
func (s *slots) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	s.next++
	return s.next - 1
}

// give returns slot, whose keys are gone, for reuse.
func (s *slots) give(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.free, slot, func(a, b int) int { return b - a })
	s.free = slices.Insert(s.free, i, slot)
}

// value is the metadata of one key (see the layout above).
type value struct {
	id      string
	queued  bool // on a QueueTimeout lease of its own
	permits int  // 0: not a Semaphore
	host    string
	pid     int
	written time.Time
	label   string
}

// value returns the metadata c writes for a key of id.
func (c *Client) value(id string, permits int, queued bool, now time.Time) string {
	var b strings.Builder
	b.Grow(len(id) + len(c.meta) + len(c.label) + 24)
	b.WriteString(id)
	b.WriteByte('|')
	if queued {
		b.WriteByte('q')
	}
	b.WriteByte('|')
	if permits > 0 {
		b.WriteString(strconv.Itoa(permits))
	}
	b.WriteByte('|')
	b.WriteString(c.meta)
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(now.UnixMilli(), 10))
	b.WriteByte('|')
	b.WriteString(c.label)
	return b.String()
}

// parseValue reads a key's metadata; a value of another layout yields what
// it can (the whole value as the id).
func parseValue(v string) value {
	parts := strings.SplitN(v, "|", 7)
	if len(parts) < 7 {
		return value{id: v}
	}
	m := value{id: parts[0], queued: parts[1] == "q", host: parts[3], label: parts[6]}
	m.permits, _ = strconv.Atoi(parts[2])
	m.pid, _ = strconv.Atoi(parts[4])
	if ms, err := strconv.ParseInt(parts[5], 10, 64); err == nil {
		m.written = time.UnixMilli(ms)
	}
	return m
}
