package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// FourLetter sends a four-letter command (srvr, mntr, cons, ...) to addr and
// returns the reply, which ends when the server closes the connection. It
// is bounded by ctx and by two seconds.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
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
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Mode returns what srvr says of the server: "standalone", "leader" or
// "follower"; an error while it is not serving.
func (s *Server) Mode(ctx context.Context) (string, error) {
	out, err := FourLetter(ctx, s.Addr(), "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if strings.Contains(out, "not currently serving") {
		return "", errors.New("zkproc: not currently serving requests")
	}
	return "", fmt.Errorf("zkproc: srvr reply without a mode: %q", out)
}
