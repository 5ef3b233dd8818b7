//go:build unix

package h1client

import (
	"net"
	"syscall"
)

// CanPeek reports whether a reused connection's end can be seen before a
// request is written on it (alive); where it cannot, callers should use
// net/http's Transport, whose reader goroutine sees it.
const CanPeek = true

// rawConnOf is nc's raw connection for alive and writeAndAwait, or nil
// when it has none.
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

// alive reports whether an idle connection may be reused: nothing has
// arrived on it, neither an end of stream (the backend closed it) nor
// stray bytes, which would be read as the next response.
func (c *backendConn) alive() bool {
	if c.raw == nil {
		return true
	}
	alive := false
	err := c.raw.Read(func(fd uintptr) bool {
		alive = peekNothing(fd)
		return true // never wait for readiness: this is a check, not a read
	})
	return err == nil && alive
}

// peekNothing reports whether nothing is there to read on fd, neither
// bytes nor an end of stream, without waiting.
func peekNothing(fd uintptr) bool {
	var buf [1]byte
	for {
		_, _, errno := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if errno == syscall.EINTR {
			continue
		}
		return errno == syscall.EAGAIN || errno == syscall.EWOULDBLOCK
	}
}

// writeAndAwait writes msg with write system calls on the connection and,
// once all of it is out, waits until the connection turns readable (the
// answer has begun, or the connection ended) without reading. It returns
// how many bytes went out; the caller writes the rest (a full socket
// buffer, an error, no raw connection) the ordinary way, which also
// reports the error. With check (a reused connection), it first looks
// whether the connection has ended or holds stray bytes, and then writes
// nothing and reports closed.
//
// Why: a read right after the write almost always finds nothing (the
// backend has not answered yet), returns EAGAIN and only then parks the
// goroutine; that empty read was one system call in four per request.
// syscall.RawConn's Read parks instead when f returns false, and it
// cannot miss the answer: before it first calls f it resets the poller's
// readiness (internal/poll's prepareRead, runtime's pollReset), so any
// byte of the answer, which the backend sends only after the request's
// bytes reach it, arrives after that reset and wakes the wait, as does an
// end of the connection that comes later. What arrived before the reset
// makes no new event: an end of stream from a backend that half-closed
// the connection after its last answer and reads on (no reset follows
// the write), or stray bytes. The check, made after the reset and before
// the first byte is written, finds those; without it such a request
// would wait out the header timeout. It is a peek that finds nothing,
// one system call, in place of the empty read.
// A wait while the deadline is expired or the connection closes ends
// with an error, which the following read meets again and reports.
func (c *backendConn) writeAndAwait(msg []byte, check bool) (n int, closed bool) {
	if c.raw == nil {
		return 0, false
	}
	// The function and its state live in c, made once per connection: a
	// closure over locals would be allocated per request.
	if c.await.f == nil {
		c.await.f = c.awaitStep
	}
	c.await.msg, c.await.n, c.await.written = msg, 0, false
	c.await.check, c.await.closed = check, false
	_ = c.raw.Read(c.await.f)
	n, closed = c.await.n, c.await.closed
	c.await.msg = nil
	return n, closed
}

// awaitStep is writeAndAwait's function for RawConn.Read: first the
// check, then the writes, then, once woken, done.
func (c *backendConn) awaitStep(fd uintptr) bool {
	a := &c.await
	if a.written {
		return true // readable now
	}
	if a.check {
		a.check = false
		if !peekNothing(fd) {
			a.closed = true
			return true
		}
	}
	for a.n < len(a.msg) {
		m, err := syscall.Write(int(fd), a.msg[a.n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return true // the ordinary write takes over from n
		}
		a.n += m
	}
	a.written = true
	return false
}
