package peerlink

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// dialer returns which of pids holds the other end of c, a loopback TCP
// connection this process accepted, or 0 if none does (or /proc cannot
// tell).
//
// The other end is the socket whose local port is c's remote port and
// whose remote port is c's local port; /proc/net/tcp and tcp6 (a JVM dials
// from an IPv6 socket) give its inode, and a process that holds it has a
// descriptor linking to "socket:[inode]".
func dialer(c net.Conn, pids []int) int {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || !remote.IP.IsLoopback() {
		return 0
	}
	inode := socketInode(remote.Port, local.Port)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		if pid != 0 && holds(pid, want) {
			return pid
		}
	}
	return 0
}

// socketInode returns the inode of the TCP socket from local port lport to
// remote port rport, or "".
func socketInode(lport, rport int) string {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if inode := findSocket(table, lport, rport); inode != "" {
			return inode
		}
	}
	return ""
}

// findSocket returns the inode of the socket in table from local port
// lport to remote port rport, or "".
func findSocket(table string, lport, rport int) string {
	var inode string
	scanTable(table, func(fs []string) {
		if inode == "" && hexPort(fs[1]) == lport && hexPort(fs[2]) == rport {
			inode = fs[9]
		}
	})
	return inode
}

// scanTable calls row with the fields of every row of a /proc/net/tcp
// table: "sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ...",
// addresses as HEXIP:HEXPORT.
func scanTable(table string, row func(fields []string)) {
	f, err := os.Open(table)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 10 {
			row(fs)
		}
	}
}

func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}

// holds reports whether process pid has a descriptor linking to target.
func holds(pid int, target string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == target {
			return true
		}
	}
	return false
}

// RemotePorts returns the remote ports of the TCP connections of process
// pid (from /proc): a test checks with it that no member reaches another
// around the proxies.
func RemotePorts(pid int) ([]int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if inode, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		scanTable(table, func(fs []string) {
			if inodes[fs[9]] {
				ports = append(ports, hexPort(fs[2]))
			}
		})
	}
	return ports, nil
}
