//go:build !unix

package tcp

import "net"

// tryWrite takes nothing on this platform: the writer goroutine writes.
func tryWrite(net.Conn, []byte) (int, error) { return 0, nil }
