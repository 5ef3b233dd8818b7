package backends

import (
	"io"
	"testing"
	"time"
)

// TestParseUsageBadFigures: figures that cannot be token counts are
// "not reported", never repaired.
func TestParseUsageBadFigures(t *testing.T) {
	unknownCached := func(p int) Usage { return Usage{PromptTokens: p, CachedTokens: -1} }
	for _, tc := range []struct {
		body string
		want Usage
	}{
		{``, UnknownUsage},
		{`not json`, UnknownUsage},
		{`{"usage":null}`, UnknownUsage},
		{`{"usage":"12"}`, UnknownUsage},
		{`{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":11}}}`, unknownCached(10)},
		{`{"usage":{"prompt_tokens":-5,"prompt_tokens_details":{"cached_tokens":1}}}`, Usage{PromptTokens: -1, CachedTokens: 1}},
		{`{"usage":{"prompt_tokens":1.5,"prompt_tokens_details":{"cached_tokens":"1"}}}`, UnknownUsage},
		{`{"usage":{"prompt_tokens":1e300}}`, UnknownUsage},
		{`{"usage":{"prompt_tokens":7},"meta_info":{"cached_tokens":7}}`, unknownCached(7)},
	} {
		if got, _ := parseUsage([]byte(tc.body), false); got != tc.want {
			t.Errorf("parseUsage(%q) = %+v, want %+v", tc.body, got, tc.want)
		}
	}
	if got, _ := parseUsage([]byte(`{"usage":{"prompt_tokens":9}}`), true); got != (Usage{PromptTokens: 9, CachedTokens: 0}) {
		t.Errorf("missing details with missingIsZero: %+v", got)
	}
}

// TestIdleTimeoutReaderSlowConsumer: time the consumer spends between
// reads does not count toward the idle timeout.
func TestIdleTimeoutReaderSlowConsumer(t *testing.T) {
	// Time the consumer spends between reads does not count.
	pr, pw := io.Pipe()
	r := newIdleBody(pr, 20*time.Millisecond)
	go func() {
		for range 3 {
			pw.Write([]byte("x"))
		}
		pw.Close()
	}()
	buf := make([]byte, 1)
	for range 3 {
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond) // a slow client
	}
	if _, err := r.Read(buf); err != io.EOF {
		t.Fatalf("err %v, want EOF", err)
	}
	r.Close()
}
