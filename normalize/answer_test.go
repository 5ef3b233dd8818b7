package normalize

import (
	"slices"
	"strings"
	"testing"
)

// TestAnswerBlocks: the blocks AnswerBlocks gives for a turn and its answer
// are exactly the first blocks of the next turn, which carries that answer
// as an assistant message, with and without tools, for answers shorter and
// longer than a block and with characters JSON escapes; and a different
// answer diverges.
func TestAnswerBlocks(t *testing.T) {
	sys := strings.Repeat("You are a careful assistant. ", 10)
	tools := `[{"type":"function","function":{"name":"f"}}]`
	for _, tl := range []string{"", tools} {
		for _, answer := range []string{"ok", strings.Repeat("a long answer \"quoted\"\n\té ", 12)} {
			t1 := blocksOf(t, blockChat(t, tl, "system", sys, "user", "question one"), KeyOptions{})
			t2 := blocksOf(t, blockChat(t, tl, "system", sys, "user", "question one", "assistant", answer, "user", "question two"), KeyOptions{})
			got := t1.AnswerBlocks([]byte(answer))
			if len(got) <= len(t1.Blocks) || len(got) > len(t2.Blocks) {
				t.Fatalf("tools %q, answer %d bytes: %d answer blocks after %d, next turn has %d", tl, len(answer), len(got), len(t1.Blocks), len(t2.Blocks))
			}
			if !slices.Equal(got, t2.Blocks[:len(got)]) {
				t.Errorf("tools %q, answer %d bytes: the next turn does not start with the answer blocks", tl, len(answer))
			}
			// The blocks that follow the answer in the next turn are the
			// new user message's own: the answer's record ended there.
			if want := len(t2.Blocks) - (len("user")+2+len("question two")+BlockSize-1)/BlockSize; len(got) != want {
				t.Errorf("tools %q, answer %d bytes: %d blocks through the answer, want %d", tl, len(answer), len(got), want)
			}
			before := slices.Clone(t1.Blocks)
			other := t1.AnswerBlocks([]byte(answer + "!"))
			if !slices.Equal(t1.Blocks, before) || !slices.Equal(got[:len(before)], before) {
				t.Errorf("tools %q: a second AnswerBlocks wrote over Blocks or over the first one's result", tl)
			}
			if other[len(other)-1] == got[len(got)-1] {
				t.Errorf("tools %q: a different answer gave the same last block", tl)
			}
		}
	}
	// Only chat requests keyed with blocks can be continued.
	if b := blocksOf(t, `{"model":"m","prompt":"complete this"}`, KeyOptions{}).AnswerBlocks([]byte("x")); b != nil {
		t.Errorf("completion request: AnswerBlocks gave %d blocks, want nil", len(b))
	}
	_, ri, err := Normalize(nil, []byte(blockChat(t, "", "user", "hi")), Options{}, KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := ri.AnswerBlocks([]byte("x")); b != nil {
		t.Errorf("chat keyed without blocks: AnswerBlocks gave %d blocks, want nil", len(b))
	}
}
