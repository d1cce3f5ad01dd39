package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/observe"
)

// LeaderReplicaArgs are the arguments Leader passes to Spawn, in order:
// backend kind, backend address, election name, the replica's label, its
// session.
type LeaderReplicaArgs struct {
	Backend, Addr, Name, Label string
	Session                    time.Duration
}

func (a LeaderReplicaArgs) list() []string {
	return []string{a.Backend, a.Addr, a.Name, a.Label, a.Session.String()}
}

// ParseLeaderReplicaArgs reads what Leader passed to Spawn.
func ParseLeaderReplicaArgs(args []string) (LeaderReplicaArgs, error) {
	if len(args) != 5 {
		return LeaderReplicaArgs{}, fmt.Errorf("leader replica: want 5 arguments, got %d", len(args))
	}
	d, err := time.ParseDuration(args[4])
	if err != nil {
		return LeaderReplicaArgs{}, fmt.Errorf("leader replica: session: %w", err)
	}
	if d <= 0 {
		return LeaderReplicaArgs{}, fmt.Errorf("leader replica: session %v: want > 0", d)
	}
	if args[2] == "" || args[3] == "" {
		return LeaderReplicaArgs{}, errors.New("leader replica: empty name or label")
	}
	return LeaderReplicaArgs{Backend: args[0], Addr: args[1], Name: args[2], Label: args[3], Session: d}, nil
}

// LeaderReplica is one candidate of the leader drill, run in its own
// process: it campaigns for a.Name with election.Lead on its own client
// (labelled a.Label, its session a.Session) and reports on out, one line
// each, with times as Unix nanoseconds of this machine's clock:
//
//	ready <session>                  campaigning; the session as the client holds it
//	term <token> <start>             elected: the term's fencing token and start
//	end <token> <end> lost:<reason>  the term lost (the client's loss time)
//	end <token> <end> stopped        the term ended because the replica stops
//
// It stops, releasing the lock if it leads, when in ends (the drill closes
// its stdin, or dies) or ctx is done, and then returns nil. A term lost
// ends at the earliest moment the replica knew: when its client reported
// the loss (an Observer, called as the lease's context is cancelled) or
// when the term's work saw it.
func LeaderReplica(ctx context.Context, a LeaderReplicaArgs, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	b, err := backend.Open(ctx, a.Backend, a.Addr)
	if err != nil {
		return err
	}
	defer b.Close()
	losses := &lossClock{at: map[int64]lossAt{}}
	c, err := b.NewClient(ctx, backend.ClientOptions{Label: a.Label, Session: a.Session, Observer: losses})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(out, "ready %s\n", c.Session()); err != nil {
		return err
	}
	e := election.New(c.Mutex(a.Name), c)
	err = e.Lead(ctx, func(t election.Term) error {
		if _, err := fmt.Fprintf(out, "term %d %d\n", t.Token, t.Since.UnixNano()); err != nil {
			return err
		}
		<-t.Context.Done()
		end, why := time.Now(), "stopped"
		if errors.Is(context.Cause(t.Context), dlock.ErrLockLost) {
			why = "lost:unknown"
			if l, ok := losses.await(t.Token, 200*time.Millisecond); ok {
				why = "lost:" + string(l.reason)
				if l.at.Before(end) {
					end = l.at
				}
			}
		}
		_, err := fmt.Fprintf(out, "end %d %d %s\n", t.Token, end.UnixNano(), why)
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// lossClock records when the client reported each hold lost, by token.
type lossClock struct {
	observe.Nop
	mu sync.Mutex
	at map[int64]lossAt
}

type lossAt struct {
	at     time.Time
	reason observe.LostReason
}

func (l *lossClock) ObserveLost(e observe.LostEvent) {
	now := time.Now()
	l.mu.Lock()
	l.at[e.Token] = lossAt{now, e.Reason}
	l.mu.Unlock()
}

// await takes the loss of token, waiting up to d for its event: the
// Lease's Context is cancelled before the client reports the loss.
func (l *lossClock) await(token int64, d time.Duration) (lossAt, bool) {
	until := time.Now().Add(d)
	for {
		if at, ok := l.take(token); ok || !time.Now().Before(until) {
			return at, ok
		}
		time.Sleep(time.Millisecond)
	}
}

func (l *lossClock) take(token int64) (lossAt, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.at[token]
	delete(l.at, token)
	return a, ok
}

// replicaLine is one line a LeaderReplica printed.
type replicaLine struct {
	kind    string // "ready", "term", "end"
	session time.Duration
	token   int64
	at      int64 // Unix ns
	why     string
}

// parseReplicaLine reads one line of LeaderReplica's output.
func parseReplicaLine(s string) (replicaLine, error) {
	f := strings.Fields(s)
	bad := fmt.Errorf("leader replica said %q", s)
	if len(f) == 0 {
		return replicaLine{}, bad
	}
	l := replicaLine{kind: f[0]}
	var err error
	switch {
	case f[0] == "ready" && len(f) == 2:
		l.session, err = time.ParseDuration(f[1])
	case f[0] == "term" && len(f) == 3, f[0] == "end" && len(f) == 4:
		if l.token, err = strconv.ParseInt(f[1], 10, 64); err == nil {
			l.at, err = strconv.ParseInt(f[2], 10, 64)
		}
		if f[0] == "end" {
			l.why = f[3]
		}
	default:
		return replicaLine{}, bad
	}
	if err != nil {
		return replicaLine{}, bad
	}
	return l, nil
}
