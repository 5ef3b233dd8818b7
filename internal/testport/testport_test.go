package testport

import (
	"net"
	"testing"
)

// TestAddrNeverRepeats asks for many addresses without binding any of them:
// the kernel may offer a port again, Addr must not.
func TestAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s not free when handed out: %v", addr, err)
		}
		ln.Close()
	}
}
