package bodydecode

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/normalize"
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
		got, err := Decode(c.header, bytes.NewReader(compress(t, c.enc, body)), Limits{})
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
		lim    Limits
		is     []error
		code   string
	}{
		{"unknown", "br", []byte("x"), Limits{}, []error{normalize.ErrUnsupportedEncoding}, normalize.CodeUnsupportedEnc},
		{"stacked", "gzip, zstd", []byte("x"), Limits{}, []error{normalize.ErrUnsupportedEncoding}, normalize.CodeUnsupportedEnc},
		{"gzip bomb", "gzip", compress(t, "gzip", bomb), Limits{}, []error{normalize.ErrCompressionRatio, normalize.ErrTooLarge}, normalize.CodeCompressionRatio},
		{"zstd bomb", "zstd", compress(t, "zstd", bomb), Limits{}, []error{normalize.ErrCompressionRatio, normalize.ErrTooLarge}, normalize.CodeCompressionRatio},
		{"deflate bomb", "deflate", compress(t, "deflate", bomb), Limits{}, []error{normalize.ErrCompressionRatio, normalize.ErrTooLarge}, normalize.CodeCompressionRatio},
		{"decoded size", "gzip", compress(t, "gzip", bomb), Limits{MaxDecodedBytes: 1 << 20, MaxRatio: 1 << 30}, []error{normalize.ErrTooLarge}, normalize.CodeDecodedSize},
		{"identity size", "", bomb, Limits{MaxDecodedBytes: 1000}, []error{normalize.ErrTooLarge}, normalize.CodeDecodedSize},
		{"corrupt gzip", "gzip", []byte("not gzip at all"), Limits{}, []error{normalize.ErrCorrupt}, normalize.CodeCorrupt},
		{"truncated zstd", "zstd", compress(t, "zstd", []byte(`{"model":"m","prompt":"some text to compress"}`))[:12], Limits{}, []error{normalize.ErrCorrupt}, normalize.CodeCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.header, bytes.NewReader(c.data), c.lim)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range c.is {
				if !errors.Is(err, want) {
					t.Errorf("error %v does not match %v", err, want)
				}
			}
			if got := normalize.ErrorCode(err); got != c.code {
				t.Errorf("code %q, want %q (%v)", got, c.code, err)
			}
			if c.code != normalize.CodeUnsupportedEnc && errors.Is(err, normalize.ErrUnsupportedEncoding) {
				t.Errorf("error %v wrongly matches normalize.ErrUnsupportedEncoding", err)
			}
		})
	}
}
