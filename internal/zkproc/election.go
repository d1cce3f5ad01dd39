package zkproc

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
)

// rewriteElectionAddr passes on the greeting of an election connection
// with the dialer's own election address replaced by its proxy's
// (proxyOf maps a real port to its proxy's). The greeting is a protocol
// version (a negative long; a non-negative one is an old greeting, the
// server id alone), the server id (long), a length (int) and that many
// bytes of "host:port" addresses separated by '|'. A server that receives
// a connection from a lower id drops it and dials back at the address in
// the greeting: without the rewrite that would bypass the proxies.
func rewriteElectionAddr(src io.Reader, proxyOf func(int) (int, bool)) ([]byte, error) {
	var version [8]byte
	if _, err := io.ReadFull(src, version[:]); err != nil {
		return nil, err
	}
	if int64(binary.BigEndian.Uint64(version[:])) >= 0 {
		return version[:], nil
	}
	var head [12]byte // sid, length
	if _, err := io.ReadFull(src, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[8:])
	if n == 0 || n > 4096 {
		return nil, fmt.Errorf("zkproc: election greeting with %d bytes of address", n)
	}
	addr := make([]byte, n)
	if _, err := io.ReadFull(src, addr); err != nil {
		return nil, err
	}
	parts := strings.Split(string(addr), "|")
	for i, a := range parts {
		host, p, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if real, err := strconv.Atoi(p); err == nil {
			if via, ok := proxyOf(real); ok {
				parts[i] = net.JoinHostPort(host, strconv.Itoa(via))
			}
		}
	}
	out := []byte(strings.Join(parts, "|"))
	binary.BigEndian.PutUint32(head[8:], uint32(len(out)))
	return slices.Concat(version[:], head[:], out), nil
}

func portAddr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
