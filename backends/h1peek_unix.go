//go:build unix

package backends

import "syscall"

// alive reports whether an idle connection may be reused: nothing has
// arrived on it, neither an end of stream (the backend closed it) nor
// stray bytes, which would be read as the next response.
func (c *h1Conn) alive() bool {
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, errno := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errno == syscall.EAGAIN || errno == syscall.EWOULDBLOCK
		return true // never wait for readiness: this is a check, not a read
	})
	return err == nil && alive
}
