package dlockfake

import (
	"context"
	"os"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// Inspect reads the state of the lock name in the Service without changing
// it (election.Inspector, with the meaning every backend gives dlock.Info):
// holders with their tokens and the time left of their leases (another
// process's, from Take: Host "elsewhere", TTL < 0), waiters in arrival
// order (Deadline: the time left before its place lapses unless its
// Client refreshes it, with QueueTimeout; < 0 without, while its call
// waits), a Semaphore's count.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	if err := seam.CheckContext(ctx); err != nil {
		return dlock.Info{}, seam.Wrap("inspect", "", name, err)
	}
	if err := seam.CheckName(name); err != nil {
		return dlock.Info{}, seam.Wrap("inspect", "", name, err)
	}
	return c.svc.inspect(name), nil
}

func (s *Service) inspect(name string) dlock.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	info := dlock.Info{Name: name, TTL: -1, LastFence: s.fences[name]}
	if n, ok := s.counts[name]; ok {
		info.Shape, info.Permits = "semaphore", n
	}
	for _, h := range s.live(name, now) {
		holder := dlock.Holder{ID: ids.Short(h.id), Host: "elsewhere", Since: h.since, Count: h.count, Fence: h.token, Mode: modeOf(h.req.shape), TTL: -1}
		if h.client != nil {
			holder.Host, holder.PID, holder.Label = s.host, os.Getpid(), h.client.label
		}
		if end := h.end(); !end.IsZero() {
			holder.TTL = end.Sub(now)
		}
		info.Holders = append(info.Holders, holder)
		info.Shape = shapeOf(h.req.shape)
		if h.req.mode == seam.Exclusive {
			info.TTL = holder.TTL
		}
	}
	info.Held = len(info.Holders) > 0
	if e := s.names[name]; e != nil {
		for _, a := range e.waiting {
			w := dlock.Waiter{ID: ids.Short(a.id), Host: s.host, PID: os.Getpid(), Label: a.c.label, Since: a.since, Mode: modeOf(a.req.shape), Deadline: -1}
			if !a.place.IsZero() {
				w.Deadline = a.place.Sub(now)
			}
			info.Queue = append(info.Queue, w)
			if !info.Held {
				info.Shape = shapeOf(e.waiting[0].req.shape)
			}
		}
	}
	return info
}

// shapeOf is the shape Inspect names for a request's shape.
func shapeOf(shape string) string {
	switch shape {
	case "rw_read", "rw_write":
		return "rw"
	case "multi":
		return "lock"
	}
	return shape
}

// modeOf is a holder's or waiter's Mode.
func modeOf(shape string) string {
	switch shape {
	case "rw_read":
		return "read"
	case "rw_write":
		return "write"
	}
	return ""
}
