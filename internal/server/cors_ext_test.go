package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/server"
)

func TestCORSForBrowsers(t *testing.T) {
	base := startRouter(t, 1, server.Config{CORSOrigins: []string{"https://app.example.com"}})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, base+"/prefixgate.v1.InferenceService/Chat", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,connect-protocol-version")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	ok := preflight("https://app.example.com")
	if ok.StatusCode != http.StatusNoContent || ok.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(ok.Header.Get("Access-Control-Allow-Headers"), "Connect-Protocol-Version") {
		t.Errorf("allowed origin preflight: %d %v", ok.StatusCode, ok.Header)
	}
	if other := preflight("https://evil.example"); other.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got CORS headers: %v", other.Header)
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/prefixgate.v1.NormalizeService/Normalize", strings.NewReader(`{"body":"e30="}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://app.example.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), server.KeyHeader) {
		t.Errorf("Connect call from the origin: %d, expose %q", resp.StatusCode, resp.Header.Get("Access-Control-Expose-Headers"))
	}
}
