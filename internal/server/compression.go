package server

import (
	"io"

	"connectrpc.com/connect"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// compressionOptions registers gzip and zstd, both from klauspost/compress,
// for Connect, gRPC and gRPC-Web message compression.
func compressionOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &gzip.Reader{} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
		connect.WithCompression("zstd",
			func() connect.Decompressor { return &zstdDecompressor{} },
			func() connect.Compressor {
				w, _ := zstd.NewWriter(io.Discard, zstd.WithEncoderConcurrency(1))
				return w
			}),
	}
}

// zstdDecompressor adapts zstd.Decoder to connect.Decompressor, whose Reset
// takes a reader and whose Close must allow reuse.
type zstdDecompressor struct {
	d *zstd.Decoder
}

func (z *zstdDecompressor) Read(p []byte) (int, error) {
	if z.d == nil {
		return 0, io.EOF
	}
	return z.d.Read(p)
}

func (z *zstdDecompressor) Reset(r io.Reader) error {
	if z.d == nil {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
		if err != nil {
			return err
		}
		z.d = d
		return nil
	}
	return z.d.Reset(r)
}

func (z *zstdDecompressor) Close() error {
	// Reset to nil input keeps the decoder for reuse without holding r.
	if z.d != nil {
		return z.d.Reset(nil)
	}
	return nil
}
