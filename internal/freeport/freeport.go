// Package freeport hands out loopback TCP ports for servers a process is
// about to start (redis-server, PostgreSQL, etcd) or for an address that
// nothing listens on.
package freeport

import (
	"errors"
	"net"
	"strconv"
	"sync"
)

// BusOffset is the distance between a Redis Cluster node's client port and
// its cluster bus port.
const BusOffset = 10000

var (
	mu sync.Mutex
	// used holds every port this process has handed out, so two servers it
	// starts never race for one port.
	used = map[int]bool{}
)

// Take returns a loopback port that was free a moment ago and that this
// process has not handed out before. With bus set, port+BusOffset was free
// too (and is below 65536). Another process may still take the port before
// the server binds it: callers retry on a new port.
func Take(bus bool) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		port, err := probe(0)
		if err != nil {
			return 0, err
		}
		if used[port] {
			continue
		}
		if bus {
			if port+BusOffset > 65535 || used[port+BusOffset] {
				continue
			}
			if _, err := probe(port + BusOffset); err != nil {
				continue
			}
			used[port+BusOffset] = true
		}
		used[port] = true
		return port, nil
	}
	return 0, errors.New("freeport: no free loopback port found")
}

// Addr returns "127.0.0.1:port" for a port from Take(false): nothing listens
// there until someone binds it.
func Addr() (string, error) {
	port, err := Take(false)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// probe binds 127.0.0.1:port, closes it again and returns the bound port.
func probe(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
