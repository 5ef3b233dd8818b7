//go:build !unix

package h1front

import (
	"net"
	"syscall"
)

// rawConnOf: readBig needs unix sockets' reads; without them every read
// goes through the connection.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// readFD is never called without a raw connection.
func readFD(uintptr, []byte) (int, error) { return 0, syscall.EINVAL }
