package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestHAProxyConfig(t *testing.T) {
	cfg, err := haproxyConfig("127.0.0.1:9000", []string{"http://127.0.0.1:9001", "http://127.0.0.1:9002"}, 4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"nbthread 2",
		"bind 127.0.0.1:9000",
		"option http-buffer-request",
		"balance hash req.body,bytes(0,4096)",
		"hash-type consistent",
		"hash-balance-factor 125",
		"server s0 127.0.0.1:9001 check",
		"server s1 127.0.0.1:9002 check",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if _, err := haproxyConfig("127.0.0.1:9000", []string{"not a url"}, 4096, 2); err == nil {
		t.Error("a backend without host was accepted")
	}
}

func TestChatBodies(t *testing.T) {
	for _, size := range []int{256, 1024, 16384} {
		bodies := chatBodies(size, 8)
		seen := map[string]bool{}
		for _, b := range bodies {
			if len(b) != size {
				t.Fatalf("size %d: body of %d bytes", size, len(b))
			}
			var v struct {
				Model    string `json:"model"`
				Messages []struct{ Role, Content string }
			}
			if err := json.Unmarshal(b, &v); err != nil || v.Model != stubModel || len(v.Messages) != 2 {
				t.Fatalf("size %d: %v %+v", size, err, v)
			}
			seen[string(b[:200])] = true
		}
		if len(seen) != len(bodies) {
			t.Errorf("size %d: bodies share their first 200 bytes", size)
		}
	}
}

func TestPercentileAndReplica(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i))
	}
	if p := percentile(lat, 50); p != 50 {
		t.Errorf("p50 = %d", p)
	}
	if p := percentile(lat, 99); p != 99 {
		t.Errorf("p99 = %d", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("empty p50 = %d", p)
	}
	if r := replicaOf([]byte(strings.Replace(stubReply, "%d", "2", 1))); r != 2 {
		t.Errorf("replicaOf = %d", r)
	}
	if r := replicaOf([]byte(`{"id":"other"}`)); r != -1 {
		t.Errorf("replicaOf(other) = %d", r)
	}
}
