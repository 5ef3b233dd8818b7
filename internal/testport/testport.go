// Package testport hands out loopback addresses for servers that tests start
// as separate processes. An address is free when handed out and is never
// handed out twice by one process, so servers started before any of them has
// bound do not collide; another process may still take the port first, and
// a caller that must not fail on that retries with a new address.
package testport

import (
	"errors"
	"net"
	"sync"
)

var issued = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// Addr returns "127.0.0.1:PORT" for a port that was free a moment ago and
// that this process has not handed out before.
func Addr() (string, error) {
	issued.Lock()
	defer issued.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		ln.Close()
		if !issued.seen[addr] {
			issued.seen[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("testport: no loopback port that was not handed out before in 100 tries")
}
