package server

import (
	"io"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/internal/h1front"

	"github.com/prefixgate/prefixgate/internal/pipeline"
)

// ClientCompressionOptions are the client options matching
// compressionOptions' zstd, for the external tests that call the server
// with zstd.
func ClientCompressionOptions() []connect.ClientOption {
	return []connect.ClientOption{
		connect.WithAcceptCompression("zstd",
			func() connect.Decompressor { return &zstdDecompressor{} },
			func() connect.Compressor {
				w, _ := zstd.NewWriter(io.Discard, zstd.WithEncoderConcurrency(1))
				return w
			}),
	}
}

// SetHeaderTimeout changes how long a request's head may take to arrive,
// for servers started after it, until the returned func restores it.
func SetHeaderTimeout(d time.Duration) (restore func()) {
	old := headerTimeout
	headerTimeout = d
	return func() { headerTimeout = old }
}

// ServeFrontDoor serves h on ln through the HTTP/1.1 front door, with
// net/http's server behind it for what it hands over, until stop.
func ServeFrontDoor(h http.Handler, ln net.Listener) (stop func()) {
	f := h1front.New(ln, h1front.Config{Handler: h, HeaderTimeout: headerTimeout, MaxBodyBytes: pipeline.DefaultMaxBodyBytes})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout}
	http1 := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, Protocols: new(http.Protocols)}
	http1.Protocols.SetHTTP1(true)
	go func() { _ = srv.Serve(f) }()
	go func() { _ = http1.Serve(f.Continued()) }()
	go func() { _ = f.Run() }()
	return func() { _ = srv.Close(); _ = http1.Close(); _ = f.Close() }
}
