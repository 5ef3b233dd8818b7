//go:build unix

package server

import (
	"net"
	"syscall"
)

// rawConnOf is nc's raw connection, for readBig, or nil when it has none.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
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
