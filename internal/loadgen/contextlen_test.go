package loadgen

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts the chat requests it carries.
type countingTransport struct{ chats atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/chat/completions" {
		c.chats.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestBenchChecksContextLength: the long-context workload does not fit the
// tiny preset's context (8,192 tokens, stated by the router's /v1/models),
// so the run stops before sending anything, saying why; a workload that
// fits is sent.
func TestBenchChecksContextLength(t *testing.T) {
	url := startStack(t)
	// Until the router's first probes have read the fleet's model lists.
	for {
		ms, _, err := listModels(context.Background(), http.DefaultClient, url)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 && ms[0].MaxModelLen > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ct countingTransport
	client := &http.Client{Transport: &ct}
	for _, model := range []string{"", "vllmsim/tiny"} {
		_, err := Run(context.Background(), Options{URL: url, Model: model, Workload: "long-context", Concurrency: 2, Requests: 4, Client: client})
		if err == nil || !strings.Contains(err.Error(), `model "vllmsim/tiny"'s context length of 8192`) ||
			!strings.Contains(err.Error(), "4 of the 4 requests of workload long-context") {
			t.Errorf("model %q: error %v, want the context length named", model, err)
		}
	}
	if n := ct.chats.Load(); n != 0 {
		t.Errorf("%d requests sent; want none once the workload is known not to fit", n)
	}
	res, err := Run(context.Background(), Options{URL: url, Workload: "sharegpt", Concurrency: 2, Requests: 4, MaxTokens: 4, Client: client})
	if err != nil || res.OK != 4 {
		t.Fatalf("a workload that fits: %+v, %v", res, err)
	}
}
