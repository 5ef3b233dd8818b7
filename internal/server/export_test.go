package server

import (
	"io"

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
