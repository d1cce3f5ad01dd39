package redisproc

import (
	"errors"
	"net"
	"strconv"
	"sync"
)

// busOffset is the distance between a cluster node's client port and its
// cluster bus port.
const busOffset = 10000

// maxClusterPort keeps port+busOffset a valid TCP port.
const maxClusterPort = 65535 - busOffset

var (
	portsMu sync.Mutex
	// portsUsed holds every port this process has handed out, so two
	// servers started by the same process never race for one port.
	portsUsed = map[int]bool{}
)

// freePort returns a loopback TCP port that was free a moment ago and that
// this process has not handed out before. With bus set, port+10000 (the
// cluster bus port) was free too and port < 55535. Another process may still
// take the port before redis-server binds it; callers retry on a new port.
func freePort(bus bool) (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port, err := probePort(0)
		if err != nil {
			return 0, err
		}
		if portsUsed[port] {
			continue
		}
		if bus {
			if port >= maxClusterPort || portsUsed[port+busOffset] {
				continue
			}
			if _, err := probePort(port + busOffset); err != nil {
				continue
			}
			portsUsed[port+busOffset] = true
		}
		portsUsed[port] = true
		return port, nil
	}
	return 0, errors.New("redisproc: no free loopback port found")
}

// probePort binds 127.0.0.1:port, closes it again and returns the bound port.
func probePort(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
