package server

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
)

// The request path every body takes before routing: read and decode
// (Content-Encoding, size and ratio limits), canonicalize, key. FuzzRequestPath
// drives it with arbitrary bodies, encodings, modes and groups;
// TestRequestPathMutations runs the same checks over a fixed number of
// seeded mutations of the seeds, so that every `go test` (and CI) explores
// beyond the hand-written seeds in bounded time. Deeper runs:
//
//	go test ./internal/server -run '^$' -fuzz FuzzRequestPath -fuzztime 60s

var (
	pathServerOnce sync.Once
	pathServer     *Server
	pathServerErr  error

	tenantServerOnce sync.Once
	tenantServer     *Server
	tenantServerErr  error

	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdErr  error
)

// requestPathServer is a server that is never started: no probes, no
// listener; its read and prepare steps are the ones requests go through.
func requestPathServer(t testing.TB) *Server {
	pathServerOnce.Do(func() {
		pathServer, pathServerErr = New(Config{Backends: []string{"http://127.0.0.1:9"}, Pipeline: pipeline.Config{PrefixLength: 1024}}, nil)
	})
	if pathServerErr != nil {
		t.Fatal(pathServerErr)
	}
	return pathServer
}

// requestPathTenantServer is requestPathServer with tenants configured:
// prepare then salts the body (cache_salt) and mixes the tenant into the
// group.
func requestPathTenantServer(t testing.TB) *Server {
	tenantServerOnce.Do(func() {
		tenantServer, tenantServerErr = New(Config{Backends: []string{"http://127.0.0.1:9"}, Pipeline: pipeline.Config{PrefixLength: 1024,
			Tenants: map[string]string{"key-1": "acme"}, TenantSecret: []byte("0123456789abcdef0123")}}, nil)
	})
	if tenantServerErr != nil {
		t.Fatal(tenantServerErr)
	}
	return tenantServer
}

// isHex32 reports whether s is 32 lowercase hex digits.
func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// checkTenantPath prepares an already decoded body for tenant "acme": it
// must come out canonical, salted with a 32-hex cache_salt, under a 32-hex
// group, and keyed as the same body without a tenant under that group.
func checkTenantPath(t *testing.T, raw []byte, mode normalize.Mode, verr error) {
	ts := requestPathTenantServer(t)
	ctx := pipeline.WithTenant(context.Background(), "acme")
	p, err := ts.pipe.Normalize(ctx, nil, raw, mode, "", 0)
	if err != nil {
		var re *pipeline.Error
		if !errors.As(err, &re) || re.Code == "" || re.Status/100 != 4 {
			t.Fatalf("tenant prepare: %v is not a 4xx request error with a code", err)
		}
		if verr == nil && re.Code != normalize.CodeSchema && re.Code != "not_an_object" {
			t.Fatalf("tenant prepare rejected valid JSON with %s: %s", re.Code, re.Message)
		}
		return
	}
	if verr != nil {
		t.Fatalf("tenant prepare accepted what validation rejects (%v): %q", verr, raw)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(p.Body, &top); err != nil {
		t.Fatalf("salted body is not a JSON object: %v: %q", err, p.Body)
	}
	var salt string
	if err := json.Unmarshal(top["cache_salt"], &salt); err != nil || !isHex32(salt) || !isHex32(p.Info.Group) {
		t.Fatalf("cache_salt %s, group %q: want 32 hex digits each", top["cache_salt"], p.Info.Group)
	}
	plain, err := requestPathServer(t).pipe.Normalize(context.Background(), nil, p.Body, mode, p.Info.Group, 0)
	if err != nil || !bytes.Equal(plain.Body, p.Body) || plain.Info.Key != p.Info.Key {
		t.Fatalf("salted body is not canonical or keys differently: %v\n%q\n%q", err, p.Body, plain.Body)
	}
}

var pathEncodings = []string{"", "gzip", "deflate", "deflate-raw", "zstd", "gzip-corrupt", "br"}

// encodeBody returns body under encoding sel and the Content-Encoding to send.
func encodeBody(t testing.TB, body []byte, sel byte) ([]byte, string) {
	name := pathEncodings[int(sel)%len(pathEncodings)]
	var buf bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch name {
	case "", "br":
		return body, name
	case "gzip-corrupt":
		return body, "gzip"
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "deflate-raw":
		fw, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		w, name = fw, "deflate"
	case "zstd":
		zstdOnce.Do(func() { zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)) })
		if zstdErr != nil {
			t.Fatal(zstdErr)
		}
		return zstdEnc.EncodeAll(body, nil), name
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), name
}

var pathModes = []normalize.Mode{normalize.ModeAuto, normalize.ModeChat, normalize.ModeCompletion, normalize.ModeNative}

// checkRequestPath sends body through read → decode → normalize → key and
// checks what must hold whatever the body: no panic; every rejection is a
// pipeline.Error with a 4xx status and a stable code; what is accepted is
// exactly what normalize accepts, canonical (a second pass changes nothing,
// key included), valid JSON, and keyed within the window. One group choice
// in four prepares the body for a tenant instead (checkTenantPath).
func checkRequestPath(t *testing.T, s *Server, body []byte, encSel, modeSel, groupSel byte) {
	wire, encoding := encodeBody(t, body, encSel)
	corrupt := pathEncodings[int(encSel)%len(pathEncodings)] == "gzip-corrupt"
	mode := pathModes[int(modeSel)%len(pathModes)]
	group := []string{"", "", "tenant-a", ""}[int(groupSel)%4]
	withTenant := int(groupSel)%4 == 3

	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(wire))
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	raw, err := s.readBody(r, httptest.NewRecorder(), nil)
	if err != nil {
		var re *pipeline.Error
		if !errors.As(err, &re) || re.Code == "" {
			t.Fatalf("read: %v is not a request error with a code", err)
		}
		switch re.Status {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("read: status %d for %v", re.Status, err)
		}
		if !corrupt && encoding != "br" {
			t.Fatalf("read of a well-formed %q body failed: %v", encoding, err)
		}
		return
	}
	if encoding == "br" {
		t.Fatal("an unsupported encoding was read")
	}
	if !corrupt && !bytes.Equal(raw, body) && len(body) > 0 {
		t.Fatalf("decoding %q changed the body", encoding)
	}

	verr := normalize.Validate(raw, normalize.Options{MaxBodyBytes: int(s.cfg.Pipeline.MaxDecodedBytes), MaxDepth: s.cfg.Pipeline.MaxDepth})
	if withTenant {
		checkTenantPath(t, raw, mode, verr)
		return
	}
	p, err := s.pipe.Normalize(context.Background(), nil, raw, mode, group, 0)
	if err != nil {
		var re *pipeline.Error
		if !errors.As(err, &re) || re.Code == "" || re.Code == "other" {
			t.Fatalf("prepare: %v is not a request error with a stable code", err)
		}
		if re.Status != http.StatusBadRequest && re.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("prepare: status %d for %v", re.Status, err)
		}
		if verr != nil && (normalize.ErrorCode(verr) != re.Code || !strings.Contains(re.Message, "offset ")) {
			t.Fatalf("prepare says %s (%s), validation says %v", re.Code, re.Message, verr)
		}
		if verr == nil && re.Code != normalize.CodeSchema {
			t.Fatalf("valid JSON rejected with %s: %s", re.Code, re.Message)
		}
		return
	}
	if verr != nil {
		t.Fatalf("prepare accepted what validation rejects (%v): %q", verr, raw)
	}
	if !json.Valid(p.Body) {
		t.Fatalf("canonical body is not JSON: %q", p.Body)
	}
	if p.Info.Mode == normalize.ModeAuto || p.Info.RoutingTextLen > s.cfg.Pipeline.PrefixLength || len(p.Info.SpillKeys) > 3 {
		t.Fatalf("route info out of bounds: %+v", p.Info)
	}
	again, err := s.pipe.Normalize(context.Background(), nil, p.Body, mode, group, 0)
	if err != nil {
		t.Fatalf("canonical body rejected: %v: %q", err, p.Body)
	}
	if !bytes.Equal(again.Body, p.Body) || again.Info.Key != p.Info.Key || len(again.Info.SpillKeys) != len(p.Info.SpillKeys) {
		t.Fatalf("second pass changed the body or key:\n%q %s\n%q %s", p.Body, p.Info.KeyHex(), again.Body, again.Info.KeyHex())
	}
}

// requestPathSeeds are bodies near every rule: each schema, the limits,
// escapes, noncharacters, numbers at the edges of the double range.
func requestPathSeeds() [][]byte {
	seeds := []string{
		`{"model":"m","messages":[{"role":"system","content":"You answer from the report."},{"role":"user","content":"What grew?"}],"temperature":0.5,"user":"a"}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]},{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f"}}],"stream":true}`,
		`{"model":"m","prompt":["a",[1,2],3],"suffix":"!","max_tokens":3,"prompt_cache_key":"pk"}`,
		`{"inputs":"What is a KV cache?","parameters":{"max_new_tokens":20,"temperature":0.7},"stream":false}`,
		`{"z":1,"metadata":{"k":"v"},"a":[1.0,-0,1e-7,9007199254740993,1e21],"model":"m"}`,
		`["\"\\\/\b\f\n\r\t","\u0000\u001f\u00e9\ud83d\ude00","\u2028"]`,
		`{"a":"\uffff"}`, `{"a":"` + "\xef\xb7\x90" + `"}`, `["\udbff\udfff"]`, `["\ud800"]`,
		`[1e400]`, `[123.456e-789]`, `[2.4703282292062328e-324]`, `[` + strings.Repeat("9", 310) + `]`,
		`{"a":1,"a":2}`, `{"mod\u0065l":"x","model":"y"}`,
		`{"model":"m","cache_salt":"mine","messages":[{"role":"user","content":"hi"}]}`,
		`{"cache\u005fsalt":{"x":[1]},"prompt":"p"}`,
		strings.Repeat("[", 128) + strings.Repeat("]", 128),
		strings.Repeat("[", 129) + strings.Repeat("]", 129),
		`{"a":1,}`, `[01]`, `{"a":tru}`, "[\"\xed\xa0\x80\"]", ``, ` `, `"just a string"`, `12`,
	}
	out := make([][]byte, len(seeds))
	for i, s := range seeds {
		out[i] = []byte(s)
	}
	return out
}

func FuzzRequestPath(f *testing.F) {
	for i, seed := range requestPathSeeds() {
		f.Add(seed, byte(i), byte(i/2), byte(i/3))
	}
	f.Fuzz(func(t *testing.T, body []byte, enc, mode, group byte) {
		checkRequestPath(t, requestPathServer(t), body, enc, mode, group)
	})
}

// pathTokens are fragments that mutations insert: structure, escapes,
// noncharacters and surrogates raw and escaped, edge numbers, schema names.
var pathTokens = []string{
	`"`, `\`, `\u`, `\ud83d`, `\ude00`, `\uffff`, `\ufdd0`, `\u0000`, `{`, `}`, `[`, `]`, `,`, `:`,
	`1e400`, `-0`, `1e-400`, `0.0`, `9007199254740993`, `null`, `true`, `"messages"`, `"prompt"`,
	`"inputs"`, `"model":"m"`, `"user":"u"`, `"temperature":1`, `"cache_salt":"s",`, "\xef\xbf\xbf", "\xed\xa0\x80",
	"\xf4\x8f\xbf\xbf", "\xc0\xaf", "\x00", "\t", `/*`, `'`,
}

// stringTokens keep a string valid when inserted inside it.
var stringTokens = []string{"a", " ", "é", "😀", `\n`, `\"`, `\\`, `\u00e9`, `\ud83d\ude00`, `\/`, "\u2028", `\ufffd`, "\ufdcf"}

// mutate applies one or two random edits to a copy of b; about half of
// them insert text just inside a string, which keeps a valid body valid, so
// that the accepting paths get explored as well as the rejecting ones.
func mutate(rng *rand.Rand, b []byte, seeds [][]byte) []byte {
	b = bytes.Clone(b)
	for range 1 + rng.IntN(2) {
		at := 0
		if len(b) > 0 {
			at = rng.IntN(len(b) + 1)
		}
		if opens := openingQuotes(b); len(opens) > 0 && rng.IntN(2) == 0 {
			at = opens[rng.IntN(len(opens))] + 1
			b = append(b[:at], append([]byte(stringTokens[rng.IntN(len(stringTokens))]), b[at:]...)...)
			continue
		}
		switch rng.IntN(5) {
		case 0: // flip a bit
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
			}
		case 1: // insert a token
			b = append(b[:at], append([]byte(pathTokens[rng.IntN(len(pathTokens))]), b[at:]...)...)
		case 2: // delete a range
			if at < len(b) {
				end := min(len(b), at+1+rng.IntN(8))
				b = append(b[:at], b[end:]...)
			}
		case 3: // repeat a range
			if at < len(b) {
				end := min(len(b), at+1+rng.IntN(16))
				chunk := bytes.Clone(b[at:end])
				b = append(b[:end], append(bytes.Repeat(chunk, 1+rng.IntN(3)), b[end:]...)...)
			}
		case 4: // splice in part of another seed
			o := seeds[rng.IntN(len(seeds))]
			if len(o) > 0 {
				i := rng.IntN(len(o))
				j := min(len(o), i+1+rng.IntN(32))
				b = append(b[:at], append(bytes.Clone(o[i:j]), b[at:]...)...)
			}
		}
	}
	return b
}

// openingQuotes returns the offsets of the quotes that open strings in b.
func openingQuotes(b []byte) []int {
	var out []int
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case !in && b[i] == '"':
			out = append(out, i)
			in = true
		case in && b[i] == '\\':
			i++
		case in && b[i] == '"':
			in = false
		}
	}
	return out
}

// TestRequestPathMutations runs checkRequestPath over a fixed number of
// seeded mutations: deterministic, and bounded by count rather than time.
func TestRequestPathMutations(t *testing.T) {
	s := requestPathServer(t)
	seeds := requestPathSeeds()
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(14, 5))
	accepted := 0
	for i := range n {
		body := mutate(rng, seeds[rng.IntN(len(seeds))], seeds)
		enc, mode, group := byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))
		ok := t.Run("", func(t *testing.T) {
			checkRequestPath(t, s, body, enc, mode, group)
		})
		if !ok {
			t.Fatalf("mutation %d failed: body %q, encoding %d, mode %d, group %d", i, body, enc, mode, group)
		}
		if _, err := s.pipe.Normalize(context.Background(), nil, body, pathModes[int(mode)%4], "", 0); err == nil {
			accepted++
		}
	}
	// Mutations that never produce a valid body would test only the
	// rejection paths.
	if accepted < n/20 {
		t.Fatalf("only %d of %d mutated bodies were accepted", accepted, n)
	}
	t.Logf("%d mutated bodies, %d accepted", n, accepted)
}
