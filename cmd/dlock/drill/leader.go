package drill

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/table"
	"github.com/dlockgo/dlock/election"
)

// LeaderOptions configure the leader drill. Zero values take defaults.
type LeaderOptions struct {
	Replicas int // candidate processes campaigning at once; default 3
	Kills    int // leaders SIGKILLed, one after another; default 3
	// Session is every replica's session: the watchdog timeout on Redis,
	// the session lease's TTL on etcd (at least 1 s, counted in whole
	// seconds), the session timeout on ZooKeeper (the server may lower or
	// raise it); default 2s.
	Session time.Duration
	// Spawn returns the command that runs LeaderReplica in a child process
	// with args (see LeaderReplicaArgs). The drill pipes its stdin and
	// stdout, and kills (SIGKILL) and reaps every process it started before
	// it returns, whatever the outcome.
	Spawn func(ctx context.Context, args []string) *exec.Cmd
	// Progress is called after every kill.
	Progress func(what string, done, total int)
}

// LeaderResult is what the leader drill measured. Times are in ms from the
// drill's start, on this machine's clock (the replicas report theirs as
// Unix times of the same clock).
type LeaderResult struct {
	Backend   string  `json:"backend"`
	Replicas  int     `json:"replicas"`
	SessionMS float64 `json:"session_ms"` // as asked
	// HeldSessionMS is the session as the replicas' clients hold it (the
	// longest among them): etcd counts whole seconds, a ZooKeeper server
	// negotiates it.
	HeldSessionMS float64      `json:"held_session_ms"`
	Terms         []LeaderTerm `json:"terms"` // in the order they began
	Kills         []LeaderKill `json:"kills"`
	// Overlaps counts the terms that began while another replica's term
	// was still open, by the witness over the terms: 0 when no two
	// replicas led at once.
	Overlaps int `json:"overlaps"`
	// TokensIncrease: every term's token is above the token of the term
	// that began before it.
	TokensIncrease bool `json:"tokens_increase"`
	// Observed is what election.Observe reported, in order.
	Observed []LeaderSeen `json:"observed"`
	// PIDs are the replica processes the drill started; every one was
	// killed or had exited, and was reaped, when the drill returned.
	PIDs     []int    `json:"pids"`
	Timeline []Event  `json:"timeline"`
	Notes    []string `json:"notes,omitempty"`
	history
	marks []Mark
}

// LeaderTerm is one replica's term as leader.
type LeaderTerm struct {
	Replica string  `json:"replica"`
	PID     int     `json:"pid"`
	Token   int64   `json:"token"`
	StartMS float64 `json:"start_ms"` // as the replica reported it
	// EndMS is when the term ended: for a killed leader, when its process
	// was reaped (dead for sure, a moment after the SIGKILL); else as the
	// replica reported it.
	EndMS float64 `json:"end_ms"`
	// Ended says how: "killed", "lost: <reason>" (its client lost the
	// lock), "stopped" (the drill's end), or "exited" (the process ended
	// on its own or had to be killed at the end).
	Ended string `json:"ended"`
	// Observed: election.Observe reported this term (its token, with the
	// replica's pid, from the holder metadata).
	Observed bool `json:"observed"`
}

// LeaderKill is one SIGKILL of the leader and what followed.
type LeaderKill struct {
	AtMS    float64 `json:"at_ms"`
	Replica string  `json:"replica"`
	PID     int     `json:"pid"`
	Token   int64   `json:"token"`
	DeadMS  float64 `json:"dead_ms"` // when the killed process was reaped
	// The next leader: the first term that began after the kill.
	NextReplica string `json:"next_replica,omitempty"`
	NextPID     int    `json:"next_pid,omitempty"`
	NextToken   int64  `json:"next_token,omitempty"`
	// GapMS is from the kill to the next term's start; -1: no replica was
	// elected within the drill's wait.
	GapMS float64 `json:"gap_ms"`
}

// LeaderSeen is one reading of election.Observe: who led, from the holder
// metadata the backend keeps.
type LeaderSeen struct {
	AtMS    float64 `json:"at_ms"` // when the drill received it
	Leading bool    `json:"leading"`
	// Replica is the drill's name of the holder, found by its pid; "" when
	// none leads or the holder is not one of the drill's replicas.
	Replica string `json:"replica,omitempty"`
	ID      string `json:"id,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Label   string `json:"label,omitempty"`
	Fence   int64  `json:"fence,omitempty"`
}

// leaderLane is the drill's one lane: the leadership.
const leaderLane = "leader"

// Leader runs the leader drill on b: o.Replicas processes (o.Spawn) each
// campaign for one name with election.Lead, on a client of their own, and
// report every term; the drill SIGKILLs the current leader o.Kills times,
// each after it led for a session
// (starting a replacement each time, as a supervisor would) and measures,
// for each kill, the gap until the next term begins. Over all the terms
// it checks that no two overlapped (a killed leader's term ends when its
// process is reaped), that tokens strictly increase, and records what
// election.Observe, on a client of the drill's own, saw. It returns an
// error when a replica cannot be started, exits on its own, or says
// something it should not, when no leader is elected within a minute of
// the start, and when ctx is done; in every case, every process it started
// is killed and reaped before it returns.
func Leader(ctx context.Context, b *backend.Backend, o LeaderOptions) (*LeaderResult, error) {
	def := LeaderDefaults()
	o.Replicas = orDefault(o.Replicas, def.Replicas)
	o.Kills = orDefault(o.Kills, def.Kills)
	o.Session = orDefault(o.Session, def.Session)
	if o.Replicas < 2 || o.Kills < 1 || o.Session <= 0 || o.Spawn == nil {
		return nil, errors.New("leader: replicas >= 2, kills >= 1, session > 0 and Spawn set")
	}
	if b.Kind == backend.Etcd && o.Session < time.Second {
		return nil, fmt.Errorf("leader: session %v: etcd counts lease TTLs in whole seconds, at least 1s", o.Session)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &leaderRun{
		o: o, b: b, name: "drill:leader:" + randomID(), t0: time.Now().UnixNano(), cctx: cctx,
		msgs: make(chan candidateMsg, 64), stop: make(chan struct{}),
		res: &LeaderResult{Backend: b.Kind, Replicas: o.Replicas, SessionMS: msf(o.Session), PIDs: []int{}},
	}
	defer d.cleanup()

	oc, err := b.NewClient(ctx, backend.ClientOptions{Label: "observer", Session: o.Session})
	if err != nil {
		return nil, err
	}
	octx, stopObserving := context.WithCancel(ctx)
	obs := election.New(oc.Mutex(d.name), oc).Observe(octx, 50*time.Millisecond)
	d.obs = obs
	defer func() {
		stopObserving()
		for range obs { // until Observe's goroutine is done with oc
		}
		_ = oc.Close()
	}()

	for range o.Replicas {
		if err := d.spawn(); err != nil {
			return nil, err
		}
	}
	for k := range o.Kills {
		if err := d.killLeader(ctx); err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress("kills", k+1, o.Kills)
		}
		if last := d.res.Kills[len(d.res.Kills)-1]; last.GapMS < 0 {
			break
		}
	}
	// Let Observe see the last leader, then stop every replica.
	_ = d.waitFor(ctx, observeWait, func() bool { t := d.openTerm(); return t == nil || t.Observed })
	if err := d.stopAll(ctx); err != nil {
		return nil, err
	}
	d.finish()
	return d.res, nil
}

// How long the drill waits: for every replica to campaign and one to lead
// (children start, dial, and may be built with -race), for Observe to see
// a leader, and for the replicas to stop.
const (
	startupWait = time.Minute
	observeWait = 5 * time.Second
	stopWait    = 15 * time.Second
)

// errWaited: a wait of the drill ran out.
var errWaited = errors.New("waited too long")

// leaderRun is one run of the leader drill: the replica processes, what
// they said, and what Observe saw. Only the goroutine that runs Leader
// touches it, except msgs (filled by one reader per process) and stop.
type leaderRun struct {
	o    LeaderOptions
	b    *backend.Backend
	name string
	t0   int64 // Unix ns
	cctx context.Context
	obs  <-chan election.Leader

	msgs chan candidateMsg
	stop chan struct{} // closed by cleanup: readers drop what is left
	wg   sync.WaitGroup

	reps     []*candidate
	terms    []*leaderTermRec // in the order the drill heard of them
	events   []leaderEvent
	marks    []Mark
	stopping bool
	res      *LeaderResult
}

// candidate is one replica process.
type candidate struct {
	name    string
	cmd     *exec.Cmd
	pid     int
	stdin   io.WriteCloser
	ready   bool
	session time.Duration
	exited  bool
	killed  bool
}

// candidateMsg is a line a replica printed, or its exit (reaped).
type candidateMsg struct {
	r    *candidate
	line string
	at   int64 // Unix ns, when received or reaped
	exit bool
	err  error
}

type leaderTermRec struct {
	LeaderTerm
	open  bool
	event int // index in events
}

type leaderEvent struct {
	at        int64
	who, what string
	term      *leaderTermRec // the term this event opened, or nil
}

func unixNow() int64 { return time.Now().UnixNano() }

func (d *leaderRun) ms(at int64) float64 { return float64((at-d.t0)/1000) / 1000 }

func (d *leaderRun) event(at int64, who, what string, t *leaderTermRec) int {
	d.events = append(d.events, leaderEvent{at: at, who: who, what: what, term: t})
	return len(d.events) - 1
}

// spawn starts one more replica process and its reader.
func (d *leaderRun) spawn() error {
	r := &candidate{name: "r" + strconv.Itoa(len(d.reps)+1)}
	args := LeaderReplicaArgs{Backend: d.b.Kind, Addr: d.b.Addr, Name: d.name, Label: r.name, Session: d.o.Session}
	cmd := d.o.Spawn(d.cctx, args.list())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("leader: start replica %s: %w", r.name, err)
	}
	r.cmd, r.pid, r.stdin = cmd, cmd.Process.Pid, stdin
	d.reps = append(d.reps, r)
	d.res.PIDs = append(d.res.PIDs, r.pid)
	d.event(unixNow(), r.name, fmt.Sprintf("process started (pid %d)", r.pid), nil)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			d.send(candidateMsg{r: r, line: s.Text(), at: unixNow()})
		}
		err := cmd.Wait() // after the last read, as os/exec asks
		d.send(candidateMsg{r: r, exit: true, err: err, at: unixNow()})
	}()
	return nil
}

func (d *leaderRun) send(m candidateMsg) {
	select {
	case d.msgs <- m:
	case <-d.stop:
	}
}

// cleanup kills every replica process still running (by its pid, through
// its os.Process) and waits until each is reaped.
func (d *leaderRun) cleanup() {
	for _, r := range d.reps {
		if !r.exited {
			_ = r.cmd.Process.Kill()
		}
	}
	close(d.stop)
	d.wg.Wait()
}

// waitFor handles what the replicas say and Observe sees until cond holds,
// for at most wait: errWaited when it ran out, ctx's error, or an error of
// a replica.
func (d *leaderRun) waitFor(ctx context.Context, wait time.Duration, cond func() bool) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	for !cond() {
		select {
		case m := <-d.msgs:
			if err := d.handle(m); err != nil {
				return err
			}
		case l, ok := <-d.obs:
			if !ok {
				d.obs = nil
				continue
			}
			d.seen(l, unixNow())
		case <-t.C:
			return errWaited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// handle records one message of a replica.
func (d *leaderRun) handle(m candidateMsg) error {
	r := m.r
	if m.exit {
		r.exited = true
		how := "exited"
		if r.killed {
			how = "killed"
		}
		for _, t := range d.terms {
			if t.open && t.Replica == r.name {
				t.open, t.EndMS, t.Ended = false, d.ms(m.at), how
			}
		}
		switch {
		case r.killed:
			d.event(m.at, r.name, "reaped: dead", nil)
			for i := range d.res.Kills {
				if k := &d.res.Kills[i]; k.PID == r.pid {
					k.DeadMS = d.ms(m.at)
				}
			}
		case d.stopping:
			d.event(m.at, r.name, "exited", nil)
		default:
			return fmt.Errorf("leader: replica %s (pid %d) exited on its own: %v", r.name, r.pid, m.err)
		}
		return nil
	}
	l, err := parseReplicaLine(m.line)
	if err != nil {
		return fmt.Errorf("leader: %s: %w", r.name, err)
	}
	switch l.kind {
	case "ready":
		r.ready, r.session = true, l.session
		d.event(m.at, r.name, fmt.Sprintf("campaigning (session %v)", l.session), nil)
	case "term":
		t := &leaderTermRec{LeaderTerm: LeaderTerm{Replica: r.name, PID: r.pid, Token: l.token, StartMS: d.ms(l.at)}, open: true}
		t.event = d.event(l.at, r.name, fmt.Sprintf("elected: leads, token %d", l.token), t)
		d.terms = append(d.terms, t)
		d.markObserved()
	case "end":
		for _, t := range d.terms {
			if t.open && t.Replica == r.name && t.Token == l.token {
				t.open, t.EndMS, t.Ended = false, d.ms(l.at), strings.Replace(l.why, ":", ": ", 1)
				d.event(l.at, r.name, "term ended: "+t.Ended, nil)
			}
		}
	}
	return nil
}

// seen records one reading of Observe.
func (d *leaderRun) seen(l election.Leader, at int64) {
	s := LeaderSeen{AtMS: d.ms(at), Leading: l.Leading}
	what := "Observe: no one leads"
	if l.Leading {
		h := l.Holder
		s.ID, s.Host, s.PID, s.Label, s.Fence = h.ID, h.Host, h.PID, h.Label, h.Fence
		for _, r := range d.reps {
			if r.pid == h.PID {
				s.Replica = r.name
			}
		}
		what = fmt.Sprintf("Observe: %s leads (pid %d, label %q, token %d)", cmp.Or(s.Replica, "someone else"), h.PID, h.Label, h.Fence)
	}
	d.res.Observed = append(d.res.Observed, s)
	d.event(at, "obs", what, nil)
	d.markObserved()
}

// markObserved marks the terms Observe reported: the holder's pid and the
// term's token (a reading may arrive before the term's own line).
func (d *leaderRun) markObserved() {
	for _, t := range d.terms {
		for _, s := range d.res.Observed {
			if s.Leading && s.PID == t.PID && s.Fence == t.Token {
				t.Observed = true
			}
		}
	}
}

// openTerm returns the newest term still open (nil: none).
func (d *leaderRun) openTerm() *leaderTermRec {
	var out *leaderTermRec
	for _, t := range d.terms {
		if t.open && (out == nil || t.Token > out.Token) {
			out = t
		}
	}
	return out
}

func (d *leaderRun) allReady() bool {
	for _, r := range d.reps {
		if !r.exited && !r.ready {
			return false
		}
	}
	return true
}

// killLeader waits until every replica campaigns and one leads (and,
// for a few seconds at most, until Observe saw it), lets it lead for a
// session, SIGKILLs it, starts a replacement, and waits for the next term.
func (d *leaderRun) killLeader(ctx context.Context) error {
	if err := d.waitFor(ctx, startupWait, func() bool { return d.openTerm() != nil && d.allReady() }); err != nil {
		if errors.Is(err, errWaited) {
			return fmt.Errorf("leader: no replica led with every replica campaigning within %v", startupWait)
		}
		return err
	}
	if err := d.waitFor(ctx, observeWait, func() bool { return d.openTerm() == nil || d.openTerm().Observed }); err != nil && !errors.Is(err, errWaited) {
		return err
	}
	// Let the leader lead for a session (its lock renewed) before the kill,
	// so that its lock outlives it as a working leader's would.
	cur := d.openTerm()
	if cur != nil {
		until := d.t0 + int64(cur.StartMS*float64(time.Millisecond)) + int64(d.o.Session)
		if err := d.waitFor(ctx, time.Duration(until-unixNow()), func() bool { return d.openTerm() != cur }); err != nil && !errors.Is(err, errWaited) {
			return err
		}
	}
	if d.openTerm() != cur || cur == nil { // the term ended meanwhile: elect again
		return d.killLeader(ctx)
	}
	var r *candidate
	for _, x := range d.reps {
		if x.name == cur.Replica {
			r = x
		}
	}
	heard := len(d.terms)
	at := unixNow()
	r.killed = true
	if err := r.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("leader: kill %s (pid %d): %w", r.name, r.pid, err)
	}
	d.res.Kills = append(d.res.Kills, LeaderKill{AtMS: d.ms(at), Replica: r.name, PID: r.pid, Token: cur.Token, GapMS: -1})
	d.event(at, r.name, fmt.Sprintf("SIGKILL (pid %d): the leader, token %d", r.pid, cur.Token), nil)
	d.marks = append(d.marks, Mark{AtMS: d.ms(at), Label: "SIGKILL " + r.name})
	if err := d.spawn(); err != nil {
		return err
	}
	k := &d.res.Kills[len(d.res.Kills)-1]
	wait := 10*d.o.Session + 30*time.Second
	err := d.waitFor(ctx, wait, func() bool { return r.exited && len(d.terms) > heard })
	switch {
	case errors.Is(err, errWaited) && r.exited:
		d.res.Notes = append(d.res.Notes, fmt.Sprintf("no replica was elected within %v of killing %s: the drill stopped killing", wait, r.name))
		return nil
	case errors.Is(err, errWaited):
		return fmt.Errorf("leader: %s (pid %d) not reaped within %v of its SIGKILL", r.name, r.pid, wait)
	case err != nil:
		return err
	}
	next := d.terms[heard]
	k.NextReplica, k.NextPID, k.NextToken = next.Replica, next.PID, next.Token
	k.GapMS = next.StartMS - k.AtMS
	e := &d.events[next.event]
	e.what += fmt.Sprintf(", %.1f ms after %s's SIGKILL", k.GapMS, r.name)
	return nil
}

// stopAll stops every running replica, as a supervisor shuts a service
// down without handing leadership on: first the ones that do not lead
// (their stdin closed: they stop campaigning and exit), then, once they
// have exited, the leader (it ends its term and releases the lock). Were
// all told at once, a follower slow to read its stdin could be elected
// by the leader's release and add a term the drill did not cause. One
// that does not exit within stopWait of being told is killed.
func (d *leaderRun) stopAll(ctx context.Context) error {
	d.stopping = true
	lead := ""
	if t := d.openTerm(); t != nil {
		lead = t.Replica
	}
	for _, leaders := range []bool{false, true} {
		var group []*candidate
		for _, r := range d.reps {
			if !r.exited && (r.name == lead) == leaders {
				group = append(group, r)
				_ = r.stdin.Close()
			}
		}
		if err := d.awaitExit(ctx, group); err != nil {
			return err
		}
	}
	return nil
}

// awaitExit waits until every replica of group has exited; one that has
// not within stopWait is killed.
func (d *leaderRun) awaitExit(ctx context.Context, group []*candidate) error {
	done := func() bool {
		for _, r := range group {
			if !r.exited {
				return false
			}
		}
		return true
	}
	err := d.waitFor(ctx, stopWait, done)
	if errors.Is(err, errWaited) {
		for _, r := range group {
			if !r.exited {
				d.res.Notes = append(d.res.Notes, fmt.Sprintf("%s (pid %d) did not stop within %v of its stdin closing: killed", r.name, r.pid, stopWait))
				_ = r.cmd.Process.Kill()
			}
		}
		err = d.waitFor(ctx, stopWait, done)
	}
	return err
}

// finish turns what was recorded into the result: the terms in the order
// they began, their spans (the witness), and the timeline.
func (d *leaderRun) finish() {
	end := d.ms(unixNow())
	terms := slices.Clone(d.terms)
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].StartMS < terms[j].StartMS })
	spanOf := map[*leaderTermRec]int{}
	res := d.res
	res.Spans = []Span{}
	res.TokensIncrease = true
	for i, t := range terms {
		if t.open {
			t.open, t.EndMS, t.Ended = false, end, "running"
		}
		res.Terms = append(res.Terms, t.LeaderTerm)
		spanOf[t] = len(res.Spans)
		res.Spans = append(res.Spans, Span{Lane: leaderLane, Who: t.Replica, StartMS: t.StartMS, EndMS: t.EndMS, Token: t.Token})
		if i > 0 && t.Token <= terms[i-1].Token {
			res.TokensIncrease = false
		}
	}
	markOverlaps(res.Spans)
	res.Overlaps = DoubleGrants(res.Spans)
	for _, r := range d.reps {
		res.HeldSessionMS = max(res.HeldSessionMS, msf(r.session))
	}
	sort.SliceStable(d.events, func(i, j int) bool { return d.events[i].at < d.events[j].at })
	for _, e := range d.events {
		ev := Event{AtMS: d.ms(e.at), Who: e.who, What: e.what}
		if e.term != nil {
			ev.Span = spanOf[e.term] + 1
		}
		res.Timeline = append(res.Timeline, ev)
	}
	res.marks = d.marks
}

// Summary returns what the text and the HTML report show.
func (r *LeaderResult) Summary() *Summary {
	kills := table.Of([]table.Column[LeaderKill]{
		table.Col("KILL", func(k LeaderKill) string { return strconv.Itoa(slices.Index(r.Kills, k) + 1) }),
		table.Col("KILLED LEADER", func(k LeaderKill) string { return fmt.Sprintf("%s (pid %d)", k.Replica, k.PID) }),
		table.Col("TOKEN", func(k LeaderKill) string { return strconv.FormatInt(k.Token, 10) }),
		table.Col("NEXT LEADER", func(k LeaderKill) string {
			if k.GapMS < 0 {
				return "none"
			}
			return fmt.Sprintf("%s (pid %d)", k.NextReplica, k.NextPID)
		}),
		table.Col("NEXT TOKEN", func(k LeaderKill) string {
			if k.GapMS < 0 {
				return "-"
			}
			return strconv.FormatInt(k.NextToken, 10)
		}),
		table.Col("GAP MS", func(k LeaderKill) string {
			if k.GapMS < 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", k.GapMS)
		}),
		table.Col("SESSION MS", func(LeaderKill) string { return fmt.Sprintf("%.0f", r.HeldSessionMS) }),
	}, r.Kills)
	kills.Notes = []string{"gap: from the SIGKILL to the next leader's term start, as that replica reported it (one clock: this machine's)."}
	switch r.Backend {
	case backend.Redis:
		kills.Notes = append(kills.Notes, fmt.Sprintf("Expected: the dead leader's key outlives it by 2/3 to 1 x the watchdog timeout (%.0f ms; renewed every third of it);", r.HeldSessionMS),
			"a candidate tries again when the TTL it was told runs out.")
	case backend.Etcd:
		kills.Notes = append(kills.Notes, fmt.Sprintf("Expected: the dead leader's session lease outlives it by 2/3 to 1 x its TTL (%.0f ms; kept alive every third of it),", r.HeldSessionMS),
			"plus etcd's expiry loop (up to 500 ms); the next candidate's watch fires when the key goes.")
	case backend.ZooKeeper:
		kills.Notes = append(kills.Notes, fmt.Sprintf("Expected: the dead leader's session outlives it by at most its timeout (%.0f ms), expired on the server's tick;", r.HeldSessionMS),
			"the next candidate's watch fires when the node goes.")
	}
	var gaps []float64
	for _, k := range r.Kills {
		if k.GapMS >= 0 {
			gaps = append(gaps, k.GapMS)
		}
	}
	gap := "no leader after any kill"
	if len(gaps) > 0 {
		gap = fmt.Sprintf("%.1f – %.1f ms after %d of %s (session %.0f ms)", slices.Min(gaps), slices.Max(gaps), len(gaps), plural(len(r.Kills), "kill"), r.HeldSessionMS)
	}
	observed := 0
	for _, t := range r.Terms {
		if t.Observed {
			observed++
		}
	}
	return &Summary{
		Title: fmt.Sprintf("leader on %s: %s campaign for one name; the leader SIGKILLed %s (session %v)",
			r.Backend, plural(r.Replicas, "replica process"), plural(len(r.Kills), "time"), time.Duration(r.SessionMS*float64(time.Millisecond))),
		Parts:  []Part{{Events: r.Timeline}},
		Tables: []table.Table{kills},
		Figures: []Figure{
			{"two led at once", r.overlapText()},
			{"tokens", r.tokensText()},
			{"gap after a kill", gap},
			{"seen by election.Observe", fmt.Sprintf("%d of %s (holder pid and token), %s", observed, plural(len(r.Terms), "term"), plural(len(r.Observed), "reading"))},
			{"replica processes", fmt.Sprintf("%d started, all reaped", len(r.PIDs))},
		},
		Notes:         r.Notes,
		TimelineTitle: "who led when",
		Spans:         r.Spans, Marks: r.marks,
	}
}

// overlapText says, from the spans, whether two replicas led at once.
func (r *LeaderResult) overlapText() string {
	if r.Overlaps > 0 {
		return fmt.Sprintf("YES: %d of %s began while another was open", r.Overlaps, plural(len(r.Terms), "term"))
	}
	return fmt.Sprintf("never (%s, each began after the one before ended)", plural(len(r.Terms), "term"))
}

func (r *LeaderResult) tokensText() string {
	s := make([]string, len(r.Terms))
	for i, t := range r.Terms {
		s[i] = strconv.FormatInt(t.Token, 10)
	}
	if r.TokensIncrease {
		return "strictly increasing: " + strings.Join(s, " < ")
	}
	return "NOT increasing: " + strings.Join(s, ", ")
}
