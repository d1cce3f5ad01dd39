package zklock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// childEnv makes the test binary a lock holder in a process of its own
// (for SIGSTOP and SIGKILL): "addr|name|session timeout".
const childEnv = "ZKLOCK_TEST_HOLDER"

// runChild acquires the mutex, says "held <token>", then checks its lease
// every 2ms. When it finds the lease lost it says "lost <gap> <first>":
// the longest gap between two checks, and whether the check that found the
// loss was the first one after that gap (the process was paused). Then it
// says "verify <err>" and exits.
func runChild() int {
	parts := strings.Split(os.Getenv(childEnv), "|")
	if len(parts) != 3 {
		fmt.Println("bad", childEnv)
		return 2
	}
	timeout, err := time.ParseDuration(parts[2])
	if err != nil {
		fmt.Println("bad timeout:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, parts[0], Config{TTL: timeout})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	l, err := c.Mutex(parts[1]).Acquire(ctx)
	if err != nil {
		fmt.Println("acquire:", err)
		return 1
	}
	// The clock starts before "held": a pause sent once it is read falls
	// between two checks.
	var longest time.Duration
	prev := time.Now()
	fmt.Printf("held %d\n", l.Token())
	for ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
		now := time.Now()
		gap := now.Sub(prev)
		prev = now
		first := false
		if gap > longest {
			longest, first = gap, true
		}
		if err := l.Err(); err != nil {
			fmt.Printf("lost %s %v\n", longest, first && errors.Is(err, dlock.ErrLockLost))
			fmt.Printf("verify %v\n", errors.Is(l.Verify(ctx), dlock.ErrLockLost))
			return 0
		}
	}
	fmt.Println("never lost")
	return 1
}

// child is a holder process started by startChild.
type child struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	token int64
}

// startChild runs a holder of name's mutex in a child process and returns
// once it holds the lock.
func startChild(t *testing.T, addr, name string, timeout time.Duration) *child {
	t.Helper()
	ch := spawnChild(t, addr, name, timeout)
	line := ch.line(t)
	if _, err := fmt.Sscanf(line, "held %d", &ch.token); err != nil {
		t.Fatalf("child: %q", line)
	}
	return ch
}

// spawnChild runs a would-be holder of name's mutex in a child process and
// returns at once (it may wait in the queue).
func spawnChild(t *testing.T, addr, name string, timeout time.Duration) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr+"|"+name+"|"+timeout.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, lines: bufio.NewScanner(out)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		io.Copy(io.Discard, out)
		cmd.Wait()
	})
	return ch
}

// line returns the child's next line of output.
func (ch *child) line(t *testing.T) string {
	t.Helper()
	if !ch.lines.Scan() {
		t.Fatalf("child ended without a line: %v", ch.lines.Err())
	}
	return ch.lines.Text()
}
