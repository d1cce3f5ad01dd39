package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/faults"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// childEnv marks a re-executed test binary as a paused holder.
const childEnv = "DLOCK_FAULTS_HOLDER"

// runHolderChild is the holder process: args are the lock server, the
// storage server and the shape. It takes the lock with the watchdog, prints
// "token N", and on each "write" line from stdin prints "held" or "lost"
// (what Err says) and then the result of a fenced write under its token
// ("accepted" or "rejected"), as a process that was paused would do without
// checking first. On EOF it unlocks and exits.
func runHolderChild(args []string) int {
	lockAddr, storeAddr, shapeName := args[0], args[1], args[2]
	fail := func(err error) int { fmt.Println("error", err); return 1 }
	rdb := redis.NewClient(&redis.Options{Addr: lockAddr})
	defer rdb.Close()
	st := redis.NewClient(&redis.Options{Addr: storeAddr})
	defer st.Close()
	c, err := dlock.New(rdb, dlock.Config{TTL: pauseLease,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	var sh *shape
	for i := range shapes {
		if shapes[i].name == shapeName {
			sh = &shapes[i]
		}
	}
	if sh == nil {
		return fail(errors.New("no shape " + shapeName))
	}
	ctx := context.Background()
	l, err := sh.holder(c, "paused").Acquire(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Println("token", l.Token())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		state := "held"
		if err := l.Err(); err != nil {
			state = "lost"
			fmt.Fprintln(os.Stderr, "Err:", err)
		}
		res := "accepted"
		if err := fence.Set(ctx, st, "data:paused", "child", l.Token(), 0); errors.Is(err, fence.ErrStale) {
			res = "rejected"
		} else if err != nil {
			return fail(err)
		}
		fmt.Println(state, res)
	}
	l.Unlock(ctx)
	return 0
}

// pauseLease is the paused holder's watchdog timeout; it is frozen for
// three times as long.
const pauseLease = time.Second

// TestPausedHolder freezes a holder process with SIGSTOP past its lease
// (Kleppmann's stop-the-world pause), for every shape: the contender gets
// the lock once the lease ran out and writes; the holder, resumed, learns it
// lost the lock, and its write under the old token is rejected by the
// fenced storage.
func TestPausedHolder(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			st := store(t)
			h := faults.NewHistory()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			cmd := exec.CommandContext(ctx, exe, "-test.run=^$", srv.Addr(), st.Options().Addr, sh.name)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr syncBuffer
			cmd.Stderr = &stderr
			defer func() {
				if t.Failed() {
					t.Logf("holder process stderr:\n%s", stderr.String())
				}
			}()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			call := h.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			lines := bufio.NewScanner(stdout)
			line := func() string {
				if !lines.Scan() {
					t.Fatalf("holder process ended: %v", lines.Err())
				}
				return lines.Text()
			}
			var token int64
			if f := strings.Fields(line()); len(f) != 2 || f[0] != "token" {
				t.Fatalf("holder: %v", f)
			} else if token, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				t.Fatal(err)
			}
			h.Add(faults.Op{Kind: faults.Acquire, Client: "A", Token: token, OK: true, Call: call, Return: h.Now()})
			write := func() (state string, accepted bool) {
				call := h.Now()
				fmt.Fprintln(stdin, "write")
				f := strings.Fields(line())
				if len(f) != 2 {
					t.Fatalf("holder: %v", f)
				}
				h.Add(faults.Op{Kind: faults.Write, Client: "A", Token: token, OK: f[1] == "accepted", Call: call, Return: h.Now()})
				return f[0], f[1] == "accepted"
			}
			if state, ok := write(); state != "held" || !ok {
				t.Fatalf("holder's first write: %s, accepted %v", state, ok)
			}

			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			cb := newClient(t, newRDB(t, srv.Addr()))
			b := &holder{name: "B", h: h, c: cb, lk: sh.contender(cb, "paused"), store: st, key: "data:paused"}
			hl, err := b.acquire(ctx)
			waited := time.Since(stopped)
			if err != nil || hl.l.Err() != nil {
				syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
				t.Fatalf("B: %v", err)
			}
			if ok, err := b.write(ctx, hl.l.Token()); !ok || err != nil {
				t.Fatalf("B's write: %v %v", ok, err)
			}
			// Keep A frozen for three leases in all.
			time.Sleep(time.Until(stopped.Add(3 * pauseLease)))
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			state, accepted := write()
			if state != "lost" {
				t.Errorf("the resumed holder's Err() said %q after a pause of 3 leases, want lost", state)
			}
			h.Add(faults.Op{Kind: faults.Lost, Client: "A", Token: token, Call: h.Now(), Return: h.Now()})
			if accepted {
				t.Errorf("the resumed holder's write under token %d was accepted after B wrote under %d", token, hl.l.Token())
			}
			if err := hl.unlock(ctx); err != nil {
				t.Errorf("B: Unlock: %v", err)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("holder process: %v", err)
			}
			readBack(t, h, st, "data:paused")
			checkHistory(t, h, false)
			noZombie(t, "B", cb)
			keys := leakedKeys(t, newRDB(t, srv.Addr()))
			if len(keys) > 0 {
				t.Errorf("keys left: %v", keys)
			}
			report(t, map[string]any{"test": t.Name(), "fault": "SIGSTOP-holder", "shape": sh.name, "lease_ms": ms(pauseLease),
				"contender_waited_ms": ms(waited), "holder_saw_lost": state == "lost", "stale_writes_rejected": btoi(!accepted),
				"stale_writes_accepted": btoi(accepted), "double_grants": faults.DoubleGrants(h.Ops()), "leaked_keys": len(keys)})
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
