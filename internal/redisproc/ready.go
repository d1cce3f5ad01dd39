package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// poll calls check until it returns nil, backing off from 5ms to 100ms
// between calls. It gives up when ctx ends, and then returns an error
// naming what it waited for and the last error from check.
func poll(ctx context.Context, what string, check func(context.Context) error) error {
	backoff := 5 * time.Millisecond
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("redisproc: waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// command sends one command to addr on a fresh connection and returns the
// reply, which must be a simple or bulk string; an error reply is returned as
// an error. Each call is bounded by ctx and by one second. It exists so that
// readiness checks need no client library and leave nothing running.
func command(ctx context.Context, addr string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			break
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
