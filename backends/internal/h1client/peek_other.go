//go:build !unix

package h1client

import (
	"net"
	"syscall"
)

// rawConnOf: the raw connection serves alive's peek and writeAndAwait,
// which need unix sockets; without them there is none.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// alive cannot peek without unix sockets' MSG_PEEK here: the connection is
// reused, and one the backend has closed fails the request.
func (c *backendConn) alive() bool { return true }

// writeAndAwait writes nothing here: the ordinary write and read do it all.
func (c *backendConn) writeAndAwait([]byte, bool) (int, bool) { return 0, false }
