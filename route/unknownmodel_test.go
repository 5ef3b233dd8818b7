package route

import (
	"context"
	"errors"
	"testing"
)

// TestUnknownModel: a model no member lists is ErrUnknownModel whatever the
// members' health, while a listed model whose members are all out of the
// candidate set stays ErrNoCandidates; Explain reports the same errors.
func TestUnknownModel(t *testing.T) {
	ms := []Member{
		{Name: "a", Models: []string{"llama", "llama:lora-sql"}},
		{Name: "b", Models: []string{"mistral"}},
	}
	for _, policy := range Policies() {
		t.Run(policy, func(t *testing.T) {
			r := mustNew(t, Config{Policy: policy, VirtualNodes: 64, Seed: 3}, ms)
			check := func(model string, want error) {
				t.Helper()
				if _, err := r.TryPick(Request{Key: 7, Model: model}); err != want {
					t.Fatalf("TryPick(%q): err = %v, want %v", model, err, want)
				}
				if _, err := r.Pick(context.Background(), Request{Key: 7, Model: model}); err != want {
					t.Fatalf("Pick(%q): err = %v, want %v", model, err, want)
				}
				if x := r.Explain(Request{Key: 7, Model: model}); x.Err != want {
					t.Fatalf("Explain(%q): err = %v, want %v", model, x.Err, want)
				}
			}
			check("gpt-4o", ErrUnknownModel)
			setHealthy(r, "a", false)
			check("llama", ErrNoCandidates)
			check("gpt-4o", ErrUnknownModel)
			setHealthy(r, "b", false)
			check("mistral", ErrNoCandidates)
			check("gpt-4o", ErrUnknownModel)
			if errors.Is(ErrUnknownModel, ErrNoCandidates) || errors.Is(ErrNoCandidates, ErrUnknownModel) {
				t.Fatal("ErrUnknownModel and ErrNoCandidates must not match each other")
			}
		})
	}
	// A member with no model list serves every model: nothing is unknown.
	r := mustNew(t, Config{VirtualNodes: 64}, append(ms, Member{Name: "c"}))
	setHealthy(r, "c", false)
	if _, err := r.TryPick(Request{Key: 7, Model: "gpt-4o"}); err != ErrNoCandidates {
		t.Fatalf("with a serve-all member ejected: err = %v, want ErrNoCandidates", err)
	}
}
