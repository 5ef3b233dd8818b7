package h1front

import (
	"net"
	"net/http"
	"time"
)

// testHeaderTimeout is the header timeout of ServeFrontDoor's servers.
var testHeaderTimeout = 10 * time.Second

// SetHeaderTimeout changes the header timeout of the servers
// ServeFrontDoor starts after it, until the returned func restores it.
func SetHeaderTimeout(d time.Duration) (restore func()) {
	old := testHeaderTimeout
	testHeaderTimeout = d
	return func() { testHeaderTimeout = old }
}

// ServeFrontDoor serves h on ln through the front door, with net/http's
// servers behind it for what it hands over, as the router's server does,
// until stop.
func ServeFrontDoor(h http.Handler, ln net.Listener) (stop func()) {
	f := New(ln, Config{Handler: h, HeaderTimeout: testHeaderTimeout, MaxBodyBytes: 32 << 20})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: testHeaderTimeout}
	http1 := &http.Server{Handler: h, ReadHeaderTimeout: testHeaderTimeout, Protocols: new(http.Protocols)}
	http1.Protocols.SetHTTP1(true)
	go func() { _ = srv.Serve(f) }()
	go func() { _ = http1.Serve(f.Continued()) }()
	go func() { _ = f.Run() }()
	return func() { _ = srv.Close(); _ = http1.Close(); _ = f.Close() }
}
