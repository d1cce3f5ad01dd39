package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/fence"
	"github.com/redis/go-redis/v9"
)

// PauseResult is what the pause drill (002 §4.1, Kleppmann's GC pause) measured.
type PauseResult struct {
	Backend                   string  `json:"backend"`
	LeaseMS                   float64 `json:"lease_ms"`
	PausedForMS               float64 `json:"paused_for_ms"`
	PausedHolderToken         int64   `json:"paused_holder_token"`
	SecondHolderToken         int64   `json:"second_holder_token"`
	SecondHolderEnteredMS     float64 `json:"second_holder_entered_ms"`
	PausedHolderWriteRejected bool    `json:"paused_holder_write_rejected"`
	UnfencedWriteOverwrote    bool    `json:"unfenced_write_overwrote"`
	// OverlapMS is how long both holders were inside at once, from the
	// spans: B's entry to A's last write.
	OverlapMS float64 `json:"overlap_ms"`
	Timeline  []Event `json:"timeline"`
	history
}

// PauseOptions configure the pause drill.
type PauseOptions struct {
	Lease time.Duration
	// Locks is the lock service both holders use; nil: the storage Redis.
	Locks *backend.Backend
	// Spawn returns the command that runs PauseHolder in a child process
	// with args (see PauseHolderArgs); the drill pipes its stdin and stdout.
	Spawn func(ctx context.Context, args []string) *exec.Cmd
}

// PauseHolderArgs are the arguments Pause passes to Spawn, in order:
// backend kind, backend address, storage Redis URL, lock name, data key,
// lease.
type PauseHolderArgs struct {
	Backend, Addr       string
	RedisURL, Name, Key string
	Lease               time.Duration
}

func (a PauseHolderArgs) list() []string {
	return []string{a.Backend, a.Addr, a.RedisURL, a.Name, a.Key, a.Lease.String()}
}

// ParsePauseHolderArgs reads what Pause passed to Spawn.
func ParsePauseHolderArgs(args []string) (PauseHolderArgs, error) {
	if len(args) != 6 {
		return PauseHolderArgs{}, fmt.Errorf("pause holder: want 6 arguments, got %d", len(args))
	}
	d, err := time.ParseDuration(args[5])
	if err != nil {
		return PauseHolderArgs{}, err
	}
	if d <= 0 {
		return PauseHolderArgs{}, fmt.Errorf("pause holder: lease %v: want > 0", d)
	}
	return PauseHolderArgs{Backend: args[0], Addr: args[1], RedisURL: args[2], Name: args[3], Key: args[4], Lease: d}, nil
}

// Pause runs the pause drill with r as the storage both holders write to
// (and as the lock service unless o.Locks is set): a holder in a child
// process takes the lock with its session (watchdog timeout, etcd lease
// TTL, ZooKeeper session timeout) set to the lease, checks it (Verify), and
// is frozen with SIGSTOP for twice the lease, or until the second holder
// wrote if that is later; meanwhile a second holder takes the expired lock
// and writes; then the first is resumed with SIGCONT and writes too — once
// through a fenced write (rejected: its token is older) and once through a
// plain SET (it clobbers the second holder's data).
func Pause(ctx context.Context, r *backend.Backend, o PauseOptions) (*PauseResult, error) {
	if o.Lease <= 0 || o.Spawn == nil {
		return nil, errors.New("pause: lease must be positive and Spawn set")
	}
	rdb, err := r.RedisClient()
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	id := randomID()
	locks := o.Locks
	if locks == nil {
		locks = r
	}
	args := PauseHolderArgs{Backend: locks.Kind, Addr: locks.Addr, RedisURL: r.Addr, Name: "drill:pause:" + id, Key: "drill:pause:data:" + id, Lease: o.Lease}
	defer rdb.Del(context.WithoutCancel(ctx), args.Key+":fenced", args.Key+":plain")
	res := &PauseResult{Backend: locks.Kind, LeaseMS: msf(o.Lease)}
	tl := NewTimeline()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := o.Spawn(cctx, args.list())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pause: start the holder process: %w", err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		cancel()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	line, err := readLine(ctx, lines, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("pause: holder process: %w", err)
	}
	tok, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		return nil, fmt.Errorf("pause: holder process said %q", line)
	}
	res.PausedHolderToken, _ = strconv.ParseInt(tok, 10, 64)
	spanA := tl.Enter(pauseLane, "A", fmt.Sprintf("(pid %d) acquired, lease %v, token %d; Verify: mine", pid, o.Lease, res.PausedHolderToken))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	paused := tl.Since()
	tl.Point(pauseLane, "A", "SIGSTOP: frozen", tl.Add("A", "SIGSTOP: frozen (a stop-the-world GC pause) before its write"))

	cb, err := locks.NewClient(ctx, backend.ClientOptions{Label: "B"})
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	// The server may round the session up (etcd to whole seconds, ZooKeeper
	// to twice its tick): B waits for as long as that can take.
	lb, err := cb.Mutex(args.Name).Acquire(ctx, dlock.Wait(3*o.Lease+30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("pause: second holder: %w", err)
	}
	res.SecondHolderToken = lb.Token()
	spanB := tl.Enter(pauseLane, "B", fmt.Sprintf("acquired the expired lock, token %d", lb.Token()))
	if err := fence.Set(ctx, rdb, args.Key+":fenced", "written by B", lb.Token(), 0); err != nil {
		return nil, err
	}
	if err := rdb.Set(ctx, args.Key+":plain", "written by B", 0).Err(); err != nil {
		return nil, err
	}
	tl.Point(pauseLane, "B", "writes both records", tl.Add("B", "wrote both records"))

	if err := sleep(ctx, 2*o.Lease-(tl.Since()-paused)); err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return nil, err
	}
	res.PausedForMS = msf(tl.Since() - paused)
	tl.Point(pauseLane, "A", "SIGCONT: resumes", tl.Add("A", fmt.Sprintf("SIGCONT after %.0f ms: resumes and writes, believing it still holds the lock", res.PausedForMS)))
	if _, err := io.WriteString(stdin, "write\n"); err != nil {
		return nil, err
	}
	for i := 0; i < 2; i++ {
		line, err := readLine(ctx, lines, 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("pause: holder process: %w", err)
		}
		switch line {
		case "fenced stale":
			res.PausedHolderWriteRejected = true
			tl.Point(pauseLane, "A", "fenced write: rejected", tl.Add("A", "fenced write: rejected, token older than one the storage has seen"))
		case "fenced ok":
			tl.Point(pauseLane, "A", "fenced write: accepted", tl.Add("A", "fenced write: accepted"))
		case "plain ok":
			tl.End(spanA)
			tl.Point(pauseLane, "A", "plain SET: overwrites B's", tl.Add("A", "plain SET: done, B's record overwritten"))
		default:
			return nil, fmt.Errorf("pause: holder process said %q", line)
		}
	}
	plain, err := rdb.Get(ctx, args.Key+":plain").Result()
	if err != nil {
		return nil, err
	}
	res.UnfencedWriteOverwrote = plain != "written by B"
	if v, _, err := fence.Get(ctx, rdb, args.Key+":fenced"); err != nil || v != "written by B" {
		return nil, fmt.Errorf("pause: fenced record = %q, %v; want B's", v, err)
	}
	tl.End(spanB)
	if err := lb.Unlock(ctx); err != nil {
		return nil, err
	}
	tl.Add("B", "unlocked")
	res.Timeline, res.history = tl.Events(), tl.history()
	res.fromHistory()
	return res, nil
}

// pauseLane is the pause drill's one lock.
const pauseLane = "the lock"

// fromHistory sets what the result reads from its spans.
func (r *PauseResult) fromHistory() {
	// The holder took its lease in its own process just before it said
	// ready: the lease ran out at most this long after the span began.
	leaseEnds(r.Spans, pauseLane, "A", r.LeaseMS)
	if i := firstSpan(r.Spans, pauseLane, "B"); i >= 0 {
		r.SecondHolderEnteredMS = r.Spans[i].StartMS
	}
	r.OverlapMS = overlapMS(r.Spans, pauseLane, "A", "B")
}

func readLine(ctx context.Context, s *bufio.Scanner, d time.Duration) (string, error) {
	got := make(chan bool, 1)
	go func() { got <- s.Scan() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ok := <-got:
		if !ok {
			if err := s.Err(); err != nil {
				return "", err
			}
			return "", io.ErrUnexpectedEOF
		}
		return strings.TrimSpace(s.Text()), nil
	case <-t.C:
		return "", fmt.Errorf("no answer within %v", d)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// PauseHolder is the child process's side of the pause drill: acquire,
// Verify, say "ready <token>", wait for "write" on in, then write with the
// token through fence.Set and with a plain SET, reporting each on out.
func PauseHolder(ctx context.Context, a PauseHolderArgs, in io.Reader, out io.Writer) error {
	o, err := redis.ParseURL(a.RedisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	b, err := backend.Open(ctx, a.Backend, a.Addr)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := b.NewClient(ctx, backend.ClientOptions{Label: "A", Session: a.Lease})
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.Mutex(a.Name).Acquire(ctx, dlock.Wait(a.Lease+10*time.Second))
	if err != nil {
		return err
	}
	if err := l.Verify(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "ready %d\n", l.Token())
	s := bufio.NewScanner(in)
	if !s.Scan() || s.Text() != "write" {
		return errors.New("pause holder: no write order")
	}
	// The process does not look at l.Context() here: it is the code between a
	// check and a write that a pause strikes.
	err = fence.Set(ctx, rdb, a.Key+":fenced", "written by A", l.Token(), 0)
	switch {
	case errors.Is(err, fence.ErrStale):
		fmt.Fprintln(out, "fenced stale")
	case err != nil:
		return err
	default:
		fmt.Fprintln(out, "fenced ok")
	}
	if err := rdb.Set(ctx, a.Key+":plain", "written by A", 0).Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "plain ok")
	_ = l.Unlock(ctx) // reports ErrLockLost: the lease ran out while frozen
	return nil
}

// Summary returns what the text and the HTML report show.
func (r *PauseResult) Summary() *Summary {
	return &Summary{
		Title: fmt.Sprintf("pause (002 §4.1) on %s: a holder frozen past its %.0f ms lease for %.0f ms, then fenced", r.Backend, r.LeaseMS, r.PausedForMS),
		Parts: []Part{{Events: r.Timeline}},
		Figures: []Figure{
			{"paused holder's fenced write rejected", fmt.Sprintf("%v (token %d < %d)", r.PausedHolderWriteRejected, r.PausedHolderToken, r.SecondHolderToken)},
			{"unfenced write overwrote B's data", fmt.Sprint(r.UnfencedWriteOverwrote)},
			{"both inside at once", bothInside(r.Spans, pauseLane, "A", "B")},
		},
		Spans: r.Spans, Points: r.points,
	}
}
