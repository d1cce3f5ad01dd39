package dlock

// Fuzz tests: the parsers of script replies and holder metadata, and lock
// names and option values through the public API against a real
// redis-server. Their seed corpora (testdata/fuzz/<FuzzName>) run as normal
// tests; explore with e.g. go test -run '^$' -fuzz FuzzAcquireInput -fuzztime 1m.

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// int64s decodes b as little-endian int64s (a trailing partial word is
// dropped).
func int64s(b []byte) []int64 {
	v := make([]int64, 0, len(b)/8)
	for len(b) >= 8 {
		v = append(v, int64(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	return v
}

func fuzzReply(v ...int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// FuzzParseGrant: any acquire-script reply is either a grant, a refusal or
// an error; never a panic, and never a grant read from a reply that does not
// start with 1.
func FuzzParseGrant(f *testing.F) {
	for _, v := range [][]int64{{1, 42}, {0, 1500}, {0, -1}, {0, 10, 1}, {1, 7, 8, 9}, {1}, {}, {2, 5}, {0, 1 << 62}} {
		f.Add(fuzzReply(v...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := int64s(b)
		g, err := parseGrant(v)
		if len(v) < 2 {
			if err == nil {
				t.Fatalf("parseGrant(%v) = %+v, want an error for a short reply", v, g)
			}
			return
		}
		if err != nil {
			t.Fatalf("parseGrant(%v): %v", v, err)
		}
		if g.ok != (v[0] == 1) {
			t.Fatalf("parseGrant(%v).ok = %v", v, g.ok)
		}
		if g.ok && g.fence != v[1] {
			t.Fatalf("parseGrant(%v).fence = %d", v, g.fence)
		}
	})
}

// FuzzHolderMeta: holder metadata (host|pid|acquired-at-ms|label), mutex
// and inspect replies built of arbitrary values are read without a panic, and
// what the Client writes reads back the same.
func FuzzHolderMeta(f *testing.F) {
	f.Add("web-1", 4242, int64(1764547200000), "orders", "tok|17|web-1|4242|1764547200000|orders")
	f.Add("", 0, int64(0), "", "")
	f.Add("h", -1, int64(-5), "a|b|c", "|||")
	f.Add("höst", 1<<30, int64(1)<<60, "\x00\xff", "x|notanumber|m")
	f.Add("a_b", 7, int64(9), "", "op|owner|30000|client|a|7|9|")
	f.Fuzz(func(t *testing.T, host string, pid int, at int64, label, raw string) {
		// Round trip of what Client.holderMeta writes (the host has its '|'
		// replaced; the label is the rest of the string).
		host = strings.ReplaceAll(host, "|", "_")
		if pid < 0 {
			pid = -pid
		}
		if pid < 0 { // math.MinInt
			pid = 0
		}
		at %= 1 << 50 // UnixMilli range the Client can produce
		if at < 0 {
			at = -at
		}
		meta := host + "|" + strconv.Itoa(pid) + "|" + strconv.FormatInt(at, 10) + "|" + label
		h := parseMeta(meta)
		if h.Host != host || h.PID != pid || h.Label != label || !h.Since.Equal(time.UnixMilli(at)) {
			t.Fatalf("parseMeta(%q) = %+v, want host %q pid %d since %d label %q", meta, h, host, pid, at, label)
		}
		// Whatever is in Redis: no panic.
		_ = parseMeta(raw)
		// An inspect reply made of what Redis could hold: read, or refused.
		_, _ = parseInspect("x", []any{raw, at, int64(pid), int64(0), int64(1), raw, raw, int64(1), at, raw, at, int64(0)})
	})
}

// fuzzServer is one redis-server shared by a fuzz target's inputs.
func fuzzServer(f *testing.F) (*redis.Client, *Client) {
	srv := redistest.Start(f)
	rdb := redistest.Client(f, srv)
	c, err := New(rdb, Config{TTL: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	return rdb, c
}

// leftKeys returns the keys of the server's database but fence counters
// and semaphore counts, with their PTTL (-1: none).
func leftKeys(t *testing.T, rdb *redis.Client) map[string]time.Duration {
	left := map[string]time.Duration{}
	iter := rdb.Scan(context.Background(), 0, "*", 100).Iterator()
	for iter.Next(context.Background()) {
		if k := iter.Val(); !strings.HasPrefix(k, DefaultPrefix+"fence:") && !strings.HasSuffix(k, ":count") {
			pttl, err := rdb.PTTL(context.Background(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if pttl != -2 { // gone meanwhile
				left[k] = pttl
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return left
}

// keyCount is the number of keys in the server's database.
func keyCount(t *testing.T, rdb *redis.Client) int64 {
	n, err := rdb.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// FuzzAcquireInput drives lock names and option values through the public
// API of every shape against a real redis-server: a bad name or option is
// refused with its sentinel error (ErrInvalidName, ErrInvalidDuration,
// ErrInvalidArgument) and writes nothing; a good one is acquired (the lock
// is free) and released, leaving only fence counters and semaphore counts.
// Never a panic.
func FuzzAcquireInput(f *testing.F) {
	rdb, c := fuzzServer(f)
	f.Add("orders", int64(0), int64(0), int64(0), 1)
	f.Add("", int64(0), int64(0), int64(0), 1)
	f.Add("a}b{c", int64(-1), int64(0), int64(0), 2)
	f.Add("x", int64(0), int64(time.Microsecond), int64(0), 1)
	f.Add("x", int64(0), int64(time.Hour), int64(time.Millisecond), 0)
	f.Add("\x00\xff*?[", int64(time.Millisecond), int64(2*time.Second), int64(time.Minute), -3)
	f.Add(strings.Repeat("n", seam.MaxNameLen+1), int64(0), int64(0), int64(0), 1)
	f.Add("m1,m2,m1", int64(0), int64(0), int64(0), 1)
	f.Fuzz(func(t *testing.T, name string, wait, lease, queue int64, permits int) {
		if lease > int64(24*time.Hour) || queue > int64(24*time.Hour) {
			t.Skip("durations beyond a day are not interesting here")
		}
		opts := []Option{Wait(time.Duration(wait)), QueueTimeout(time.Duration(queue))}
		if queue == 0 {
			opts = opts[:1]
		}
		if lease != 0 {
			opts = append(opts, LeaseTime(time.Duration(lease)))
		}
		badName := name == "" || len(name) > seam.MaxNameLen
		badDur := wait < 0 || (lease != 0 && lease < int64(time.Millisecond)) || (queue != 0 && queue < int64(30*time.Millisecond))
		names := strings.Split(name, ",")
		lockers := map[string]Locker{
			"Mutex": c.Mutex(name), "Lock": c.Lock(name), "FairLock": c.FairLock(name),
			"Read": c.RWLock(name).ReadLock(), "Write": c.RWLock(name).WriteLock(),
			"Semaphore": c.Semaphore(name, permits), "MultiLock": c.MultiLock(names...),
		}
		// a name's semaphore count outlives its grants (set by the first
		// acquisition): every input starts without one
		if !badName {
			_ = rdb.Del(context.Background(), "dlock:{"+name+"}:count").Err()
		}
		for kind, lk := range lockers {
			bad := badName
			switch kind {
			case "Semaphore":
				bad = bad || permits < 1
			case "MultiLock":
				bad = false
				seen := map[string]bool{}
				for _, n := range names {
					bad = bad || n == "" || len(n) > seam.MaxNameLen || seen[n]
					seen[n] = true
				}
			}
			before := keyCount(t, rdb)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l, err := lk.Acquire(ctx, opts...)
			cancel()
			switch {
			case bad || badDur:
				if err == nil {
					l.Unlock(context.Background())
					t.Fatalf("%s %q %v: bad input accepted", kind, name, opts)
				}
				if !errors.Is(err, ErrInvalidName) && !errors.Is(err, ErrInvalidDuration) && !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("%s %q: bad input gave %v, want an invalid-input sentinel", kind, name, err)
				}
				if after := keyCount(t, rdb); after != before {
					t.Fatalf("%s %q: refused input changed the key count %d -> %d", kind, name, before, after)
				}
			case err != nil && lease > 0 && lease < int64(50*time.Millisecond) && errors.Is(err, ErrNotAcquired):
				// a lease this short can run out before the grant's reply
				// arrives: refused, never handed out late
			case err != nil:
				t.Fatalf("%s %q (free lock, good options %d/%d/%d): %v", kind, name, wait, lease, queue, err)
			default:
				if err := l.Unlock(context.Background()); err != nil {
					t.Fatalf("%s %q: Unlock: %v", kind, name, err)
				}
			}
		}
		// Inspect reads whatever is there; a bad name is refused.
		if _, err := c.Inspect(context.Background(), name); badName != (err != nil) {
			t.Fatalf("Inspect(%q) = %v", name, err)
		}
		// Every key a grant wrote is gone by the end of its lease: released
		// by Unlock, given back, or expired in Redis (a grant whose reply
		// came after its 1 ms lease is refused, and its keys end with their
		// TTL: a key found with under a millisecond left is not a leak).
		// A key without an expiry outlives every lease.
		until := time.Now().Add(max(time.Duration(lease), c.TTL()) + time.Second)
		for {
			left := leftKeys(t, rdb)
			if len(left) == 0 {
				break
			}
			for k, pttl := range left {
				if pttl < 0 {
					t.Fatalf("%q: key %s left after every lease was released, with no expiry", name, k)
				}
			}
			if time.Now().After(until) {
				t.Fatalf("%q: keys left after every lease was released and had ended: %v", name, left)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
