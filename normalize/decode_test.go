package normalize

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

func compress(t *testing.T, enc string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch enc {
	case "gzip":
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
	case "deflate":
		w := zlib.NewWriter(&b)
		w.Write(data)
		w.Close()
	case "raw-deflate":
		w, _ := flate.NewWriter(&b, flate.BestCompression)
		w.Write(data)
		w.Close()
	case "zstd":
		w, _ := zstd.NewWriter(&b)
		w.Write(data)
		w.Close()
	default:
		b.Write(data)
	}
	return b.Bytes()
}

func TestDecodeBody(t *testing.T) {
	body := []byte(`{"model":"m","prompt":"` + strings.Repeat("hello ", 100) + `"}`)
	for _, c := range []struct{ header, enc string }{
		{"", ""}, {"identity", ""}, {"gzip", "gzip"}, {"x-gzip", "gzip"}, {" GZIP ", "gzip"},
		{"deflate", "deflate"}, {"deflate", "raw-deflate"}, {"zstd", "zstd"},
	} {
		got, err := DecodeBody(c.header, bytes.NewReader(compress(t, c.enc, body)), DecodeLimits{})
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%q/%s: %v", c.header, c.enc, err)
		}
	}
}

func TestDecodeBodyErrors(t *testing.T) {
	bomb := bytes.Repeat([]byte{' '}, 4<<20)
	cases := []struct {
		name   string
		header string
		data   []byte
		lim    DecodeLimits
		is     []error
		code   string
	}{
		{"unknown", "br", []byte("x"), DecodeLimits{}, []error{ErrUnsupportedEncoding}, CodeUnsupportedEnc},
		{"stacked", "gzip, zstd", []byte("x"), DecodeLimits{}, []error{ErrUnsupportedEncoding}, CodeUnsupportedEnc},
		{"gzip bomb", "gzip", compress(t, "gzip", bomb), DecodeLimits{}, []error{ErrCompressionRatio, ErrTooLarge}, CodeCompressionRatio},
		{"zstd bomb", "zstd", compress(t, "zstd", bomb), DecodeLimits{}, []error{ErrCompressionRatio, ErrTooLarge}, CodeCompressionRatio},
		{"deflate bomb", "deflate", compress(t, "deflate", bomb), DecodeLimits{}, []error{ErrCompressionRatio, ErrTooLarge}, CodeCompressionRatio},
		{"decoded size", "gzip", compress(t, "gzip", bomb), DecodeLimits{MaxDecodedBytes: 1 << 20, MaxRatio: 1 << 30}, []error{ErrTooLarge}, CodeDecodedSize},
		{"identity size", "", bomb, DecodeLimits{MaxDecodedBytes: 1000}, []error{ErrTooLarge}, CodeDecodedSize},
		{"corrupt gzip", "gzip", []byte("not gzip at all"), DecodeLimits{}, []error{ErrCorrupt}, CodeCorrupt},
		{"truncated zstd", "zstd", compress(t, "zstd", []byte(`{"model":"m","prompt":"some text to compress"}`))[:12], DecodeLimits{}, []error{ErrCorrupt}, CodeCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBody(c.header, bytes.NewReader(c.data), c.lim)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range c.is {
				if !errors.Is(err, want) {
					t.Errorf("error %v does not match %v", err, want)
				}
			}
			if got := ErrorCode(err); got != c.code {
				t.Errorf("code %q, want %q (%v)", got, c.code, err)
			}
			if c.code != CodeUnsupportedEnc && errors.Is(err, ErrUnsupportedEncoding) {
				t.Errorf("error %v wrongly matches ErrUnsupportedEncoding", err)
			}
		})
	}
}
