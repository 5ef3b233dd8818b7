//go:build !unix

package h1client

import (
	"net"
	"syscall"
)

// CanPeek: without MSG_PEEK a reused connection's end is found only when
// the request written on it fails, so callers should use net/http's
// Transport here.
const CanPeek = false

// rawConnOf: the raw connection serves alive's peek and writeAndAwait,
// which need unix sockets; without them there is none.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// alive cannot peek without unix sockets' MSG_PEEK here: the connection is
// reused, and one the backend has closed fails the request.
func (c *backendConn) alive() bool { return true }

// writeAndAwait writes nothing here: the ordinary write and read do it all.
func (c *backendConn) writeAndAwait([]byte, bool) (int, bool) { return 0, false }
