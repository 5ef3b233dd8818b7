// Package bodydecode undoes an HTTP request body's Content-Encoding
// (gzip, deflate, zstd) within bounds on the decoded size and the
// expansion ratio. It lives apart from package normalize so that the
// normalizer, and the Go SDK that imports it, carry no compression
// library; its errors carry normalize's error classes and reason codes,
// which the front doors already map to statuses.
package bodydecode

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/normalize"
)

// Decode defaults; Limits fields left at zero take these.
const (
	DefaultMaxDecodedBytes = normalize.DefaultMaxBodyBytes
	DefaultMaxRatio        = 100
	// ratioFloor is the decoded size below which the ratio is not checked:
	// small bodies of repetitive JSON legitimately compress very well.
	ratioFloor = 64 << 10
)

// Limits bounds Decode.
type Limits struct {
	// MaxDecodedBytes limits the decoded body (default 8 MiB).
	MaxDecodedBytes int64
	// MaxRatio limits decoded bytes per compressed byte read once the
	// decoded body is past 64 KiB (default 100).
	MaxRatio int
	// SizeHint is the body's length as sent, when known (a request's
	// Content-Length), else 0 or negative. It limits nothing: it only lets
	// an uncompressed body be read into one buffer of its exact size
	// instead of a growing one. A hint past MaxDecodedBytes is ignored.
	SizeHint int64
}

// Error reports why a body could not be decoded. It matches
// normalize.ErrUnsupportedEncoding (415), normalize.ErrTooLarge (413; normalize.ErrCompressionRatio too for
// a likely compression bomb) or normalize.ErrCorrupt (400) with errors.Is.
type Error struct {
	Encoding string
	// Offset is the number of decoded bytes produced before the failure.
	Offset int64
	Reason string

	code  string
	kinds []error
}

func (e *Error) Error() string {
	return fmt.Sprintf("content-encoding %q: offset %d: %s", e.Encoding, e.Offset, e.Reason)
}

// Code returns the stable reason code.
func (e *Error) Code() string { return e.code }

// Unwrap returns the error classes (and the underlying decoder error, if any).
func (e *Error) Unwrap() []error { return e.kinds }

// Decode reads r and undoes contentEncoding: "" or "identity", "gzip"
// (or "x-gzip"), "deflate" (zlib-wrapped as HTTP specifies, or raw), or
// "zstd". Stacked encodings are not accepted. The decoded size and the
// expansion ratio are bounded by lim.
func Decode(contentEncoding string, r io.Reader, lim Limits) ([]byte, error) {
	return DecodeInto(nil, contentEncoding, r, lim)
}

// DecodeInto is Decode reading into dst's capacity (its contents
// are overwritten) when that is enough, so that a caller can recycle body
// buffers. The result may or may not share dst's memory.
func DecodeInto(dst []byte, contentEncoding string, r io.Reader, lim Limits) ([]byte, error) {
	if lim.MaxDecodedBytes <= 0 {
		lim.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if lim.MaxRatio <= 0 {
		lim.MaxRatio = DefaultMaxRatio
	}
	enc := strings.ToLower(strings.TrimSpace(contentEncoding))
	cr := &countingReader{r: r}
	var dec io.Reader
	switch enc {
	case "", "identity":
		return readBounded(dst, enc, r, nil, lim)
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(cr)
		if err != nil {
			return nil, corrupt(enc, 0, err)
		}
		defer zr.Close()
		dec = zr
	case "deflate":
		br := &peekReader{r: cr}
		if zlibHeader(br.peek2()) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, corrupt(enc, 0, err)
			}
			defer zr.Close()
			dec = zr
		} else {
			fr := flate.NewReader(br)
			defer fr.Close()
			dec = fr
		}
	case "zstd":
		zr, err := zstd.NewReader(cr,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(lim.MaxDecodedBytes)+1),
			zstd.WithDecoderMaxWindow(min(uint64(lim.MaxDecodedBytes)+1, zstd.MaxWindowSize)))
		if err != nil {
			return nil, corrupt(enc, 0, err)
		}
		defer zr.Close()
		dec = zr
	default:
		return nil, &Error{Encoding: contentEncoding, Reason: "unsupported content encoding (want identity, gzip, deflate or zstd)",
			code: normalize.CodeUnsupportedEnc, kinds: []error{normalize.ErrUnsupportedEncoding}}
	}
	return readBounded(dst, enc, dec, cr, lim)
}

func corrupt(enc string, off int64, err error) error {
	return &Error{Encoding: enc, Offset: off, Reason: "corrupt body: " + err.Error(), code: normalize.CodeCorrupt, kinds: []error{normalize.ErrCorrupt, err}}
}

// readChunk is the most readBounded asks of r per Read: a decompressor
// produces at most this much between two ratio checks.
const readChunk = 32 << 10

// readBounded reads r to EOF straight into the result (in dst's capacity
// when it suffices), checking the decoded size (and, for a compressed body,
// the expansion ratio) after every Read.
func readBounded(dst []byte, enc string, r io.Reader, compressed *countingReader, lim Limits) ([]byte, error) {
	buf := dst[:0]
	switch {
	case compressed == nil && lim.SizeHint > 0 && lim.SizeHint <= lim.MaxDecodedBytes:
		// One spare byte, so that the Read that reports EOF needs no growth.
		if int64(cap(buf)) < lim.SizeHint+1 {
			buf = make([]byte, 0, lim.SizeHint+1)
		}
	case compressed == nil:
		if cap(buf) == 0 {
			buf = make([]byte, 0, 512)
		}
	default:
		if cap(buf) < readChunk {
			buf = make([]byte, 0, readChunk)
		}
	}
	for {
		if free := cap(buf) - len(buf); free == 0 || (compressed != nil && free < readChunk) {
			// Double, and keep a whole chunk free for a decompressor so
			// that its reads (and so the ratio checks) fall where they
			// would with a fixed 32 KiB read buffer.
			buf = slices.Grow(buf, max(cap(buf), readChunk))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), len(buf)+readChunk)])
		if n > 0 {
			if int64(len(buf)+n) > lim.MaxDecodedBytes {
				return nil, &Error{Encoding: enc, Offset: lim.MaxDecodedBytes,
					Reason: fmt.Sprintf("decoded body is over the limit of %d bytes", lim.MaxDecodedBytes),
					code:   normalize.CodeDecodedSize, kinds: []error{normalize.ErrTooLarge}}
			}
			buf = buf[:len(buf)+n]
			if compressed != nil && len(buf) > ratioFloor && int64(len(buf)) > int64(lim.MaxRatio)*max(compressed.n, 1) {
				return nil, &Error{Encoding: enc, Offset: int64(len(buf)),
					Reason: fmt.Sprintf("expands more than %d:1 (%d bytes from %d): likely a compression bomb", lim.MaxRatio, len(buf), compressed.n),
					code:   normalize.CodeCompressionRatio, kinds: []error{normalize.ErrCompressionRatio, normalize.ErrTooLarge}}
			}
		}
		if err == io.EOF {
			if len(buf) == 0 {
				return nil, nil
			}
			return buf, nil
		}
		if err != nil {
			if compressed == nil {
				return nil, fmt.Errorf("read body: %w", err)
			}
			var de *Error
			if errors.As(err, &de) {
				return nil, err
			}
			if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				// The frame declares more than the decoded-size limit allows.
				return nil, &Error{Encoding: enc, Offset: int64(len(buf)),
					Reason: fmt.Sprintf("zstd frame needs more than the decoded-size limit of %d bytes: %v", lim.MaxDecodedBytes, err),
					code:   normalize.CodeDecodedSize, kinds: []error{normalize.ErrTooLarge, err}}
			}
			return nil, corrupt(enc, int64(len(buf)), err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// peekReader lets deflate look at the first two bytes to tell zlib from raw.
type peekReader struct {
	r    io.Reader
	head []byte
	done bool
}

func (p *peekReader) peek2() []byte {
	if !p.done {
		p.done = true
		var b [2]byte
		n, _ := io.ReadFull(p.r, b[:])
		p.head = b[:n]
	}
	return p.head
}

func (p *peekReader) Read(b []byte) (int, error) {
	p.peek2()
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// ReadByte makes peekReader an io.ByteReader so flate does not wrap it in a
// buffer that reads ahead of the count.
func (p *peekReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(p, b[:])
	return b[0], err
}

func zlibHeader(h []byte) bool {
	return len(h) == 2 && h[0]&0x0F == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0
}
