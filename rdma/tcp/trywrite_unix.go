//go:build unix

package tcp

import (
	"net"
	"syscall"
)

// tryWrite writes as much of b to nc as the socket takes without blocking
// and returns how much that was. A would-block is not an error. Connections
// that do not expose a file descriptor take nothing (the writer goroutine
// then writes the frame).
func tryWrite(nc net.Conn, b []byte) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, nil
	}
	n := 0
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true
			case e != nil:
				werr = e
				return true
			case m <= 0:
				return true
			}
		}
		return true
	})
	if err != nil {
		return n, err
	}
	return n, werr
}
