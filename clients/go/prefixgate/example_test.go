package prefixgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/prefixgate/prefixgate/clients/go/prefixgate"
)

func ExampleCanonicalize() {
	out, err := prefixgate.Canonicalize([]byte(`{ "temperature": 1.0, "messages": [], "model": "m\u00e9" }`), prefixgate.ModeAuto)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	_, err = prefixgate.Canonicalize([]byte(`{"a":1,"a":2}`), prefixgate.ModeAuto)
	fmt.Println(err)
	// Output:
	// {"model":"mé","messages":[],"temperature":1}
	// offset 7: duplicate member name "a"
}

func ExampleBuild() {
	spec := prefixgate.PromptSpec{
		Model:        "llama-3.1-8b",
		Instructions: "Answer from the document.",
		Documents:    []prefixgate.Document{{ID: "q3", Title: "Report", Text: "Revenue grew 12%."}},
		Question:     "What grew?",
		Metadata:     map[string]string{"request_id": "r-1"},
	}
	body, ri, err := prefixgate.BuildKey(spec, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(body))
	spec.Metadata["request_id"] = "r-2"
	_, ri2, _ := prefixgate.BuildKey(spec, 0)
	fmt.Println(ri.Key == ri2.Key)
	// Output:
	// {"model":"llama-3.1-8b","messages":[{"content":"Answer from the document.\n\n## Document q3: Report\n\nRevenue grew 12%.","role":"system"},{"content":"What grew?","role":"user"}],"metadata":{"request_id":"r-1"}}
	// true
}

// ExampleClient_Chat sends a built prompt through a router. It runs only
// with PREFIXGATE_URL set, so it has no Output comment.
func ExampleClient_Chat() {
	url := os.Getenv("PREFIXGATE_URL")
	if url == "" {
		return
	}
	c := prefixgate.NewClient(nil, url)
	res, err := c.Chat(context.Background(), prefixgate.PromptSpec{
		Model:      "vllmsim/tiny",
		Question:   "Hello?",
		Parameters: map[string]json.RawMessage{"max_tokens": json.RawMessage(`8`)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.GetContent(), res.GetRouting().GetBackend(), res.GetRouting().GetKey())
}

// ExampleClient_Lint lints a small corpus through a router. It runs only
// with PREFIXGATE_URL set.
func ExampleClient_Lint() {
	url := os.Getenv("PREFIXGATE_URL")
	if url == "" {
		return
	}
	c := prefixgate.NewClient(nil, url)
	res, err := c.Lint(context.Background(), [][]byte{
		[]byte(`{"model":"vllmsim/tiny","messages":[{"role":"system","content":"Now: 2026-11-30T09:15:00Z."},{"role":"user","content":"hi"}]}`),
	}, prefixgate.LintOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range res.GetFindings() {
		fmt.Println(f.GetRuleId(), f.GetJsonPath(), f.GetOffset(), f.GetHint())
	}
	fmt.Println(res.GetSummary().GetWarnings(), "warnings")
}

// ExampleClient_Complete sends a completion and backs off when the router
// says so. It runs only with PREFIXGATE_URL set.
func ExampleClient_Complete() {
	url := os.Getenv("PREFIXGATE_URL")
	if url == "" {
		return
	}
	c := prefixgate.NewClient(nil, url)
	res, err := c.Complete(context.Background(), prefixgate.CompletionSpec{
		Model:      "vllmsim/tiny",
		Prompt:     "Once upon a time",
		Parameters: map[string]json.RawMessage{"max_tokens": json.RawMessage(`8`)},
	})
	if d, ok := prefixgate.RetryAfter(err); ok {
		fmt.Println("busy; retry in", d)
		return
	} else if err != nil {
		fmt.Println(prefixgate.Code(err), err)
		return
	}
	fmt.Println(res.GetText(), res.GetRouting().GetBackend())
}
