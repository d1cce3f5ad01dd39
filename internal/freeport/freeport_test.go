package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestTakeDistinctAndFree(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port, err := Take(false)
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
	port, err := Take(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{port, port + BusOffset} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d (bus pair) not free: %v", p, err)
		}
		l.Close()
	}
}
