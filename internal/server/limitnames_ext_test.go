package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/prefixgate/prefixgate/internal/pipeline"
	"github.com/prefixgate/prefixgate/internal/server"
	"github.com/prefixgate/prefixgate/normalize"
)

// settingName names a field as a test operator would set it.
func settingName(field string) string { return "[" + field + "]" }

// TestLimitErrorsNameTheirSetting: every refusal for a configured limit
// says which setting raises it, as Config.SettingName names it.
func TestLimitErrorsNameTheirSetting(t *testing.T) {
	base := startRouter(t, 1, server.Config{Pipeline: pipeline.Config{MaxBodyBytes: 64 << 10, MaxDecodedBytes: 256 << 10, MaxRatio: 50, MaxDepth: 16, MaxStringBytes: 1024, SettingName: settingName}})
	prompt := func(s string) []byte { return []byte(`{"model":"vllmsim/tiny","prompt":` + s + `}`) }
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	zs := func(b []byte) []byte {
		enc, _ := zstd.NewWriter(nil)
		return enc.EncodeAll(b, nil)
	}
	for _, tc := range []struct {
		name, encoding string
		body           io.Reader
		status         int
		field          string
	}{
		{"content-length over the body limit", "", bytes.NewReader(prompt(`"` + strings.Repeat("a", 70<<10) + `"`)), 413, "MaxBodyBytes"},
		// No length: net/http reads it, and the read stops at the limit.
		{"chunked body over the body limit", "", io.MultiReader(strings.NewReader(strings.Repeat(" ", 70<<10)), bytes.NewReader(prompt(`"a"`))), 413, "MaxBodyBytes"},
		{"decoded size", "zstd", bytes.NewReader(zs(prompt(`"` + strings.Repeat("ab", 200<<10) + `"`))), 413, "MaxDecodedBytes"},
		{"compression ratio", "gzip", bytes.NewReader(gz(prompt(`"` + strings.Repeat("a", 200<<10) + `"`))), 413, "MaxRatio"},
		{"depth", "", strings.NewReader(strings.Repeat("[", 40) + strings.Repeat("]", 40)), 400, "MaxDepth"},
		{"string length", "", bytes.NewReader(prompt(`"` + strings.Repeat("a", 2000) + `"`)), 400, "MaxStringBytes"},
		{"number literal", "", bytes.NewReader(prompt(`1` + strings.Repeat("0", 2000))), 400, "MaxStringBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", tc.body)
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d; want %d (body %s)", resp.StatusCode, tc.status, body)
			}
			if want := "raise it with [" + tc.field + "]"; !strings.Contains(string(body), want) {
				t.Errorf("body %s does not say %q", body, want)
			}
		})
	}
}

// TestPrepareLimitErrorsNameTheirSetting: the endpoint picker's entry,
// Prepare, names the setting too; without SettingName the Config field is
// named.
func TestPrepareLimitErrorsNameTheirSetting(t *testing.T) {
	for _, tc := range []struct {
		name func(string) string
		want string
	}{
		{settingName, "raise it with [MaxBodyBytes]"},
		{nil, "raise it with pipeline.Config.MaxBodyBytes"},
	} {
		srv, err := server.New(server.Config{Backends: []string{"http://127.0.0.1:9"}, Pipeline: pipeline.Config{MaxBodyBytes: 1024, SettingName: tc.name}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = srv.Pipeline().Prepare(context.Background(), pipeline.Request{Body: bytes.Repeat([]byte(" "), 2048), Mode: normalize.ModeAuto})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v; want one saying %q", err, tc.want)
		}
		if got := srv.BodyLimitHint(); !strings.Contains(got, tc.want) {
			t.Errorf("BodyLimitHint() = %q; want %q", got, tc.want)
		}
	}
}

// TestConnectBodyLimitNamesItsSetting: a Connect call over the body limit
// is resource_exhausted, and the message names the setting.
func TestConnectBodyLimitNamesItsSetting(t *testing.T) {
	base := startRouter(t, 1, server.Config{Pipeline: pipeline.Config{MaxBodyBytes: 4096, SettingName: settingName}})
	body := `{"model":"vllmsim/tiny","body":"` + strings.Repeat("a", 8000) + `"}`
	resp, err := http.Post(base+"/prefixgate.v1.InferenceService/Invoke", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(got), `"code":"resource_exhausted"`) || !strings.Contains(string(got), "raise it with [MaxBodyBytes]") {
		t.Errorf("%d %s; want resource_exhausted naming the setting", resp.StatusCode, got)
	}
}
