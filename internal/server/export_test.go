package server

import (
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/klauspost/compress/zstd"
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
