package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBenchAllFailedIsAnError: when every request fails, bench prints no
// table of zeros; it exits 1 with the first error.
func TestBenchAllFailedIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m"}]}`)
			return
		}
		http.Error(w, `{"error":{"message":"the engine is asleep"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	for _, format := range [][]string{nil, {"--json"}} {
		var out, errb bytes.Buffer
		args := append([]string{"--url", srv.URL, "--concurrency", "2", "--requests", "3", "--workload", "zipf"}, format...)
		code := runBench(args, nil, &out, &errb)
		if code != 1 || out.Len() != 0 {
			t.Errorf("bench %v: exit %d, stdout %q; want 1 and nothing on stdout", format, code, out.String())
		}
		if want := "prefixgate bench: all 3 requests failed; the first: HTTP 400: "; !strings.HasPrefix(errb.String(), want) ||
			!strings.Contains(errb.String(), "the engine is asleep") {
			t.Errorf("bench %v: stderr %q, want it to start %q with the backend's message", format, errb.String(), want)
		}
	}
}

// TestBenchChecksContextLength: a workload whose requests do not fit the
// context length /v1/models states is refused before anything is sent.
func TestBenchChecksContextLength(t *testing.T) {
	var chats atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","max_model_len":100}]}`)
			return
		}
		chats.Add(1)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := runBench([]string{"--url", srv.URL, "--concurrency", "1", "--requests", "2", "--workload", "long-context"}, nil, &out, &errb)
	want := `prefixgate bench: 2 of the 2 requests of workload long-context need more tokens than model "m"'s context length of 100`
	if code != 1 || out.Len() != 0 || !strings.HasPrefix(errb.String(), want) || chats.Load() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q, %d requests sent; want 1, nothing, %q…, none", code, out.String(), errb.String(), chats.Load(), want)
	}
}
