package vllmsim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func setFaults(t *testing.T, base, body string) {
	t.Helper()
	resp, b := post(t, base+"/admin/faults", body)
	if resp.StatusCode != 200 {
		t.Fatalf("set faults: %d %s", resp.StatusCode, b)
	}
}

func TestFaultErrorRate(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	setFaults(t, u, `{"error_rate":1}`)
	resp, b := post(t, u+"/v1/chat/completions", chatBody("", "s", "u", "", 1))
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"InternalServerError"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// Health stays up under an error rate.
	if resp, err := http.Get(u + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
	// A partial rate fails some and serves some.
	setFaults(t, u, `{"error_rate":0.5}`)
	var ok, failed int
	for range 60 {
		resp, _ := post(t, u+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
		if resp.StatusCode == 200 {
			ok++
		} else {
			failed++
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("ok %d failed %d", ok, failed)
	}
	setFaults(t, u, `{}`)
	if resp, b := post(t, u+"/v1/completions", `{"prompt":"x","max_tokens":1}`); resp.StatusCode != 200 {
		t.Fatalf("after clearing: %d %s", resp.StatusCode, b)
	}
}

func TestFaultFromConfig(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.ErrorRate = 1
	f := startFleet(t, 1, cfg)
	if resp, _ := post(t, f.URLs()[0]+"/v1/completions", `{"prompt":"x"}`); resp.StatusCode != 500 {
		t.Fatal(resp.StatusCode)
	}
}

func TestFaultLatencySpike(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	setFaults(t, u, `{"latency_spike_rate":1,"latency_spike":"300ms"}`)
	start := time.Now()
	if resp, _ := post(t, u+"/v1/completions", `{"prompt":"x","max_tokens":1}`); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the spike", d)
	}
	resp, err := http.Get(u + "/admin/faults")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"latency_spike":"300ms"`) {
		t.Fatalf("faults %s", b)
	}
}

func TestFaultHang(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	setFaults(t, u, `{"hang":true}`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", u+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
	_, err := http.DefaultClient.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: err %v", err)
	}
	// The admin endpoint still answers, and clearing the fault heals.
	setFaults(t, u, `{}`)
	if resp, _ := post(t, u+"/v1/completions", `{"prompt":"x","max_tokens":1}`); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
}

func TestFaultCloseConnection(t *testing.T) {
	f := startFleet(t, 1, fastConfig())
	u := f.URLs()[0]
	setFaults(t, u, `{"close_connection":true}`)
	_, err := http.Post(u+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err == nil {
		t.Fatal("request succeeded on a closed connection")
	}
}

func TestFaultCrashAndRestart(t *testing.T) {
	f := startFleet(t, 2, fastConfig())
	u := f.URLs()
	body := chatBody("", longSystem, "q", "", 1)
	chat(t, u[0], body)
	setFaults(t, u[0], `{"crash":true}`)
	r := f.Replicas()[0]
	waitFor(t, func() bool {
		_, err := http.Get(u[0] + "/health")
		return err != nil
	})
	// The other replica is unaffected.
	chat(t, u[1], body)
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if r.URL() != u[0] {
		t.Fatalf("restarted on %s, want %s", r.URL(), u[0])
	}
	// The restarted replica lost its cache.
	if got := chat(t, u[0], body).Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Fatalf("cache survived the crash: %d", got)
	}
}

func TestCrashDropsInFlight(t *testing.T) {
	cfg := fastConfig()
	cfg.Speed = 1
	f := startFleet(t, 1, cfg)
	r := f.Replicas()[0]
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(f.URLs()[0]+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":5000}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = errors.New("no error")
			}
		}
		errc <- err
	}()
	waitFor(t, func() bool { return r.Stats().Running == 1 })
	r.Crash()
	if err := <-errc; err == nil || err.Error() == "no error" {
		t.Fatalf("in-flight request: %v", err)
	}
}
