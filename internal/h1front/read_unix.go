//go:build unix

package h1front

import (
	"net"
	"syscall"
)

// rawConnOf is nc's raw connection, for readBig, or nil when it has none.
func rawConnOf(nc net.Conn) syscall.RawConn {
	// Only the net package's own connections: a wrapper that embeds one
	// has its SyscallConn too, but its Read and Write may do more than
	// the descriptor's, and the raw calls would go around them.
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// readFD is one read system call on fd.
func readFD(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }
