package servers

import (
	"net"
	"sync"
)

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{} // ports handed out by this process
)

// FreePort returns a loopback TCP port that was free a moment ago and that
// this process has not handed out before.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return port, nil
		}
	}
}
