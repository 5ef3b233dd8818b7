package pipeline_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/normalize"
	"github.com/prefixgate/prefixgate/route"
)

const chat = `{ "messages": [{"content": "You are terse.", "role": "system"}, {"role": "user", "content": "hi"}] }`

func newPipeline(t *testing.T, cfg pipeline.Config, members ...route.Member) *pipeline.Pipeline {
	t.Helper()
	rt, err := route.New(route.Config{}, members)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(cfg, rt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// wantError checks err's status and code as a client would see them.
func wantError(t *testing.T, err error, status int, code string) *pipeline.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %d %s", status, code)
	}
	e := pipeline.AsError(err)
	if e.Status != status || e.Code != code {
		t.Fatalf("error %d %s (%q); want %d %s", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  pipeline.Config
		want string
	}{
		{pipeline.Config{PrefixLength: 10}, "PrefixLength: 10 is outside"},
		{pipeline.Config{MaxBodyBytes: 100}, "MaxBodyBytes: 100 is below 1024"},
		{pipeline.Config{Tenants: map[string]string{"k": "t"}, TenantSecret: []byte("short")}, "TenantSecret: a secret of at least 16 bytes"},
		{pipeline.Config{MaxStringBytes: 8}, "MaxStringBytes: 8 is outside 16..67108864"},
		{pipeline.Config{Tenants: map[string]string{"k": strings.Repeat("t", 257)}, TenantSecret: []byte("a secret of 16+ bytes")}, "Tenants: a tenant name of 257 bytes is over 256"},
		{pipeline.Config{MaxDecodedBytes: -1}, "MaxDecodedBytes: -1 is below 1024"},
		{pipeline.Config{MaxDepth: -3}, "MaxDepth: -3 is below 1"},
		{pipeline.Config{MaxRatio: -5}, "MaxRatio: -5 is below 1"},
	} {
		err := tc.cfg.Defaults().Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v; want %q…", tc.cfg, err, tc.want)
		}
	}
	if err := (pipeline.Config{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestPrepareDecodesAndKeysAsNormalizeDoes(t *testing.T) {
	p := newPipeline(t, pipeline.Config{})
	plain, err := p.Normalize(context.Background(), nil, []byte(chat), normalize.ModeChat, "g", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []pipeline.Request{
		{Body: []byte(chat)},
		{Body: []byte(chat), Encoding: "identity"},
		{Body: gzipped(t, []byte(chat)), Encoding: "gzip"},
	} {
		in.Mode, in.Group = normalize.ModeChat, "g"
		got, err := p.Prepare(context.Background(), in)
		if err != nil {
			t.Fatalf("%s: %v", in.Encoding, err)
		}
		if !bytes.Equal(got.Body, plain.Body) || got.Info.Key != plain.Info.Key {
			t.Errorf("%q: body %q key %s; want %q %s", in.Encoding, got.Body, got.Info.KeyHex(), plain.Body, plain.Info.KeyHex())
		}
		if rr := got.RouteRequest(); rr.Key != plain.Info.Key {
			t.Errorf("%q: route request key %x; want %x", in.Encoding, rr.Key, plain.Info.Key)
		}
	}
}

func TestPrepareRefusals(t *testing.T) {
	p := newPipeline(t, pipeline.Config{MaxBodyBytes: 1024})
	ctx := context.Background()
	_, err := p.Prepare(ctx, pipeline.Request{Body: make([]byte, 1025), Mode: normalize.ModeChat})
	e := wantError(t, err, http.StatusRequestEntityTooLarge, "body_too_large")
	if e.Message != "request body is larger than the limit of 1024 bytes (raise it with pipeline.Config.MaxBodyBytes)" {
		t.Errorf("message %q", e.Message)
	}
	_, err = p.Prepare(ctx, pipeline.Request{Body: []byte(chat), Encoding: "br", Mode: normalize.ModeChat})
	wantError(t, err, http.StatusUnsupportedMediaType, normalize.CodeUnsupportedEnc)
	_, err = p.Prepare(ctx, pipeline.Request{Body: []byte(chat), Mode: normalize.ModeChat, Group: "tab\there"})
	wantError(t, err, http.StatusBadRequest, "invalid_group")
	_, err = p.Prepare(ctx, pipeline.Request{Body: []byte(`{"messages": [}`), Mode: normalize.ModeChat})
	e = wantError(t, err, http.StatusBadRequest, normalize.CodeInvalidCharacter)
	if !strings.HasPrefix(e.Message, "invalid request body: ") {
		t.Errorf("message %q", e.Message)
	}
}

func TestTenants(t *testing.T) {
	const key = "pk-test-0123456789abcdef"
	p := newPipeline(t, pipeline.Config{Tenants: map[string]string{key: "acme"}, TenantSecret: []byte("a secret of 16+ bytes")})
	if !p.TenantsEnabled() {
		t.Fatal("tenants not enabled")
	}
	ctx := context.Background()
	for _, auth := range []string{"", "Bearer nope", key} {
		_, err := p.Prepare(ctx, pipeline.Request{Body: []byte(chat), Mode: normalize.ModeChat, Authorization: auth})
		wantError(t, err, http.StatusUnauthorized, "invalid_api_key")
	}
	in := pipeline.Request{Body: []byte(chat), Mode: normalize.ModeChat, Authorization: "Bearer " + key}
	got, err := p.Prepare(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's group and cache_salt are MACs: the body and key differ
	// from the same request without a tenant.
	open := newPipeline(t, pipeline.Config{})
	plain, err := open.Prepare(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Info.Key == plain.Info.Key || !bytes.Contains(got.Body, []byte(`"cache_salt":"`)) {
		t.Errorf("tenant's request keyed as without tenants: %q", got.Body)
	}
	in.Body = []byte(`["not", "an", "object"]`)
	in.Mode = normalize.ModeAuto
	_, err = p.Prepare(ctx, in)
	wantError(t, err, http.StatusBadRequest, "not_an_object")
	if tenant, err := open.Authenticate(""); tenant != "" || err != nil {
		t.Errorf("without tenants Authenticate = %q, %v", tenant, err)
	}
}

func TestDecode(t *testing.T) {
	p := newPipeline(t, pipeline.Config{MaxBodyBytes: 1024})
	body, err := p.Decode(nil, "gzip", bytes.NewReader(gzipped(t, []byte(chat))), -1)
	if err != nil || string(body) != chat {
		t.Fatalf("Decode = %q, %v", body, err)
	}
	_, err = p.Decode(nil, "", strings.NewReader(chat), 2048)
	if e := wantError(t, err, http.StatusRequestEntityTooLarge, "body_too_large"); !e.BodyUnread {
		t.Error("a Content-Length over the limit is not refused unread")
	}
	rd := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(strings.Repeat(" ", 2048))), 1024)
	_, err = p.Decode(nil, "", rd, -1)
	if e := wantError(t, err, http.StatusRequestEntityTooLarge, "body_too_large"); e.BodyUnread {
		t.Error("a body read up to the limit is called unread")
	}
}

func TestPickError(t *testing.T) {
	p := newPipeline(t, pipeline.Config{}, route.Member{Name: "a", Models: []string{"m1"}}, route.Member{Name: "b", Models: []string{"m2", "m1"}})
	for _, tc := range []struct {
		err    error
		model  string
		status int
		code   string
		msg    string
	}{
		{route.ErrUnknownModel, "x", http.StatusNotFound, "model_not_found", `model "x" is not served by any backend; the fleet serves m1, m2`},
		{&route.SaturatedError{RetryAfter: 1500 * time.Millisecond}, "m1", http.StatusTooManyRequests, "saturated", "every backend is at its concurrency bound: "},
		{route.ErrNoCandidates, "m1", http.StatusServiceUnavailable, "no_backend", `no healthy backend serves model "m1": `},
		{route.ErrNoCandidates, "", http.StatusServiceUnavailable, "no_backend", "no healthy backend: "},
		{context.DeadlineExceeded, "", http.StatusGatewayTimeout, "timeout", "request timed out while waiting for a backend"},
		{context.Canceled, "", 499, "canceled", "client canceled the request"},
		{errors.New("boom"), "", http.StatusInternalServerError, "internal", "boom"},
	} {
		e := wantError(t, p.PickError(tc.err, tc.model), tc.status, tc.code)
		if !strings.HasPrefix(e.Message, tc.msg) {
			t.Errorf("%v: message %q; want %q…", tc.err, e.Message, tc.msg)
		}
		if tc.code == "saturated" && e.RetryAfter != 1500*time.Millisecond {
			t.Errorf("saturated: Retry-After %v", e.RetryAfter)
		}
	}
	if got := pipeline.QuoteModel(strings.Repeat("m", 200)); len(got) != 128+2+len("…") {
		t.Errorf("QuoteModel of 200 bytes is %d bytes long", len(got))
	}
}

func TestErrors(t *testing.T) {
	wantError(t, errors.New("plain"), http.StatusInternalServerError, "internal")
	wantError(t, pipeline.NewError(http.StatusServiceUnavailable, "no_backend", "none"), http.StatusServiceUnavailable, "no_backend")
	wantError(t, pipeline.NewError(200, "ok", "not an error status"), http.StatusInternalServerError, "internal")
	if got := pipeline.Status(pipeline.NewError(http.StatusNotFound, "x", "y")); got != http.StatusNotFound {
		t.Errorf("Status = %d", got)
	}
	for _, tc := range []struct {
		e       pipeline.Error
		typ     string
		seconds int
	}{
		{pipeline.Error{Status: 400}, "invalid_request_error", 0},
		{pipeline.Error{Status: 404}, "invalid_request_error", 0},
		{pipeline.Error{Status: 429, RetryAfter: 1500 * time.Millisecond}, "rate_limit_error", 2},
		{pipeline.Error{Status: 429, RetryAfter: time.Second}, "rate_limit_error", 1},
		{pipeline.Error{Status: 499}, "invalid_request_error", 0},
		{pipeline.Error{Status: 503}, "server_error", 0},
	} {
		if typ, s := tc.e.Type(), tc.e.RetryAfterSeconds(); typ != tc.typ || s != tc.seconds {
			t.Errorf("%d after %v: type %s, Retry-After %d; want %s, %d", tc.e.Status, tc.e.RetryAfter, typ, s, tc.typ, tc.seconds)
		}
	}
}
