package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestVLLMSimHelpAndUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runVLLMSim([]string{"--help"}, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage: prefixgate vllmsim") || !strings.Contains(out.String(), "-cache-blocks") {
		t.Fatalf("help: code %d out %q", code, out.String())
	}
	for _, args := range [][]string{
		{"--bogus"},
		{"--replicas", "0"},
		{"--speed", "-1"},
		{"--preset", "nope"},
		{"--error-rate", "2"},
		{"extra"},
		{"--listen", "nonsense"},
	} {
		out.Reset()
		errOut.Reset()
		code := runVLLMSim(args, nil, &out, &errOut)
		if args[0] == "--listen" {
			if code != 1 {
				t.Errorf("%v: code %d", args, code)
			}
			continue
		}
		if code != 2 || errOut.Len() == 0 || out.Len() != 0 {
			t.Errorf("%v: code %d stdout %q stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

func TestVLLMSimServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runVLLMSimContext(ctx, []string{
			"--listen", "127.0.0.1:0", "--replicas", "2", "--preset", "tiny", "--model", "m",
			"--speed", "1000", "--cache-blocks", "256", "--adapters", "a1,a2=/p/a2",
		}, nil, pw, &errOut)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var urls []string
	for len(urls) < 2 && sc.Scan() {
		urls = append(urls, sc.Text())
	}
	go io.Copy(io.Discard, pr)
	if len(urls) != 2 || urls[0] == urls[1] || !strings.HasPrefix(urls[0], "http://127.0.0.1:") {
		t.Fatalf("urls %v, stderr %s", urls, errOut.String())
	}
	for i, u := range urls {
		resp, err := http.Post(u+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"a2","messages":[{"role":"user","content":"hello"}],"max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 200 || body.Usage.CompletionTokens != 2 {
			t.Fatalf("replica %d: status %d", i, resp.StatusCode)
		}
		if want := "vllmsim-" + string(rune('0'+i)); resp.Header.Get("X-Vllmsim-Replica") != want {
			t.Fatalf("replica header %q, want %q", resp.Header.Get("X-Vllmsim-Replica"), want)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d, stderr %s", c, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no shutdown")
	}
	if _, err := http.Get(urls[0] + "/health"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}
