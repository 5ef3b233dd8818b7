package normalize

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func blocksOf(t *testing.T, body string, kopts KeyOptions) RouteInfo {
	t.Helper()
	kopts.Blocks = true
	_, ri, err := Normalize(nil, []byte(body), Options{}, kopts)
	if err != nil {
		t.Fatalf("Normalize(%s): %v", body, err)
	}
	return ri
}

func blockChat(t *testing.T, tools string, msgs ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := 0; i < len(msgs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		text, _ := json.Marshal(msgs[i+1])
		b.WriteString(`{"role":"` + msgs[i] + `","content":` + string(text) + `}`)
	}
	b.WriteString(`]`)
	if tools != "" {
		b.WriteString(`,"tools":` + tools)
	}
	b.WriteString(`}`)
	return b.String()
}

// TestBlocksTurnPrefix: a conversation's next turn repeats every block of
// the turn before, even when the first user message is shorter than a
// block, and the blocks cover the final message too.
func TestBlocksTurnPrefix(t *testing.T) {
	sys := strings.Repeat("You are a careful assistant. ", 10)
	for _, u1 := range []string{"hi", strings.Repeat("tell me about caches ", 9)} {
		t1 := blocksOf(t, blockChat(t, "", "system", sys, "user", u1), KeyOptions{})
		t2 := blocksOf(t, blockChat(t, "", "system", sys, "user", u1, "assistant", "sure, here it is", "user", "more"), KeyOptions{})
		if len(t1.Blocks) == 0 || len(t2.Blocks) <= len(t1.Blocks) {
			t.Fatalf("u1 %d bytes: turn 1 has %d blocks, turn 2 %d", len(u1), len(t1.Blocks), len(t2.Blocks))
		}
		if !slices.Equal(t1.Blocks, t2.Blocks[:len(t1.Blocks)]) {
			t.Errorf("u1 %d bytes: turn 2 does not start with turn 1's blocks", len(u1))
		}
		// Message alignment: system record (6+1+len+1 bytes) in full blocks
		// and one partial, then the user message's own blocks.
		sysRec := len("system") + 2 + len(sys)
		userRec := len("user") + 2 + len(u1)
		want := (sysRec+BlockSize-1)/BlockSize + (userRec+BlockSize-1)/BlockSize
		if len(t1.Blocks) != want {
			t.Errorf("u1 %d bytes: %d blocks, want %d", len(u1), len(t1.Blocks), want)
		}
		if want := (sysRec + userRec + 3) / 4; t1.PromptTokens != want {
			t.Errorf("PromptTokens = %d, want %d", t1.PromptTokens, want)
		}
	}
}

// TestBlocksSeed: group, model and tools change every block; the final
// message changes only its own.
func TestBlocksSeed(t *testing.T) {
	body := blockChat(t, "", "system", "be brief", "user", "question one")
	base := blocksOf(t, body, KeyOptions{})
	other := blocksOf(t, body, KeyOptions{Group: "tenant-a"})
	tools := blocksOf(t, blockChat(t, `[{"type":"function","function":{"name":"f"}}]`, "system", "be brief", "user", "question one"), KeyOptions{})
	model := blocksOf(t, strings.Replace(body, `"model":"m"`, `"model":"m2"`, 1), KeyOptions{})
	for name, ri := range map[string]RouteInfo{"group": other, "model": model} {
		if len(ri.Blocks) != len(base.Blocks) {
			t.Fatalf("%s: %d blocks, want %d", name, len(ri.Blocks), len(base.Blocks))
		}
		for i := range ri.Blocks {
			if ri.Blocks[i] == base.Blocks[i] {
				t.Errorf("%s: block %d unchanged", name, i)
			}
		}
	}
	if len(tools.Blocks) != len(base.Blocks)+1 || tools.Blocks[1] == base.Blocks[0] {
		t.Errorf("tools: %d blocks (want %d, tools first) or message blocks unchanged", len(tools.Blocks), len(base.Blocks)+1)
	}
	q2 := blocksOf(t, blockChat(t, "", "system", "be brief", "user", "question two"), KeyOptions{})
	if q2.Blocks[0] != base.Blocks[0] || q2.Blocks[1] == base.Blocks[1] {
		t.Errorf("final message: shared system block must match and the question's must differ")
	}
}

// TestBlocksKeepKeys: asking for blocks changes nothing else in RouteInfo
// (the SDKs' keys and conformance vectors), over every valid golden body.
func TestBlocksKeepKeys(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.json")
	if len(files) == 0 {
		t.Fatal("no golden bodies")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mode := goldenMode(t, f)
		_, plain, err := Normalize(nil, src, Options{Mode: mode}, KeyOptions{Mode: mode})
		if err != nil {
			continue // golden bodies of another mode's schema
		}
		_, with, err := Normalize(nil, src, Options{Mode: mode}, KeyOptions{Mode: mode, Blocks: true})
		if err != nil {
			t.Fatalf("%s: with blocks: %v", f, err)
		}
		if with.RoutingTextLen > 0 && (len(with.Blocks) == 0 || with.PromptTokens <= 0) {
			t.Errorf("%s: no blocks (%d) or tokens (%d)", f, len(with.Blocks), with.PromptTokens)
		}
		with.Blocks, with.PromptTokens = nil, 0
		if plain.Key != with.Key || !slices.Equal(plain.SpillKeys, with.SpillKeys) || plain.RoutingTextLen != with.RoutingTextLen || plain.Mode != with.Mode {
			t.Errorf("%s: blocks changed the key: %+v vs %+v", f, plain, with)
		}
	}
}

// TestBlocksWholePrompt: blocks cover text far past the key's 8N reach, in
// chat, completion and native mode.
func TestBlocksWholePrompt(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 4*MaxPrefixLength/16) // 256 KiB
	for name, body := range map[string]string{
		"chat":       blockChat(t, "", "user", long, "assistant", "ok", "user", "and"),
		"completion": `{"model":"m","prompt":["` + long + `","tail"]}`,
		"native":     `{"input":"` + long + `"}`,
	} {
		ri := blocksOf(t, body, KeyOptions{PrefixLength: MinPrefixLength})
		if len(ri.Blocks) < len(long)/BlockSize {
			t.Errorf("%s: %d blocks for %d bytes", name, len(ri.Blocks), len(long))
		}
		if ri.PromptTokens < len(long)/4 {
			t.Errorf("%s: PromptTokens %d", name, ri.PromptTokens)
		}
	}
	// Without the option there are none.
	_, ri, err := Normalize(nil, []byte(blockChat(t, "", "user", "x")), Options{}, KeyOptions{})
	if err != nil || ri.Blocks != nil || ri.PromptTokens != 0 {
		t.Errorf("blocks without asking: %v %v %d", err, ri.Blocks, ri.PromptTokens)
	}
}

// TestBlockCountsCutLikeAFreshCount: the routing text's cut starts from
// the block hasher's character counts when blocks are asked for, and must
// cut exactly where counting from the start does. Random chat and
// completion bodies mix one- to four-byte characters (so blocks split
// characters), tools or none, and lengths around every spill window;
// Normalize and RouteKey are both checked, with and without blocks.
func TestBlockCountsCutLikeAFreshCount(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	alphabet := []string{"a", "b", " ", "\n", "é", "ß", "中", "文", "😀", "\u0001", `"`}
	text := func(chars int) string {
		var b strings.Builder
		for range chars {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	// Windows are 1024 << k characters for k up to spillWindows.
	sizes := []int{0, 1, 63, 64, 65}
	for k := 0; k <= spillWindows; k++ {
		w := MinPrefixLength << k
		sizes = append(sizes, w-1, w, w+1)
	}
	for trial := range 120 {
		var body string
		switch trial % 3 {
		case 0, 1:
			var msgs []string
			for range 1 + r.IntN(4) {
				msgs = append(msgs, []string{"system", "user", "assistant"}[r.IntN(3)], text(sizes[r.IntN(len(sizes))]/(1+r.IntN(3))))
			}
			tools := ""
			if trial%3 == 1 {
				tools = `[{"type":"function","function":{"name":"` + strings.Repeat("ü", r.IntN(40)) + `"}}]`
			}
			body = blockChat(t, tools, msgs...)
		default:
			p, _ := json.Marshal(text(sizes[r.IntN(len(sizes))]))
			body = `{"model":"m","prompt":` + string(p) + `}`
		}
		kopts := KeyOptions{PrefixLength: MinPrefixLength}
		canon, plain, err := Normalize(nil, []byte(body), Options{}, kopts)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		kopts.Blocks = true
		_, with, err := Normalize(nil, []byte(body), Options{}, kopts)
		if err != nil {
			t.Fatalf("trial %d: with blocks: %v", trial, err)
		}
		scanned, err := RouteKey(canon, kopts)
		if err != nil {
			t.Fatalf("trial %d: RouteKey: %v", trial, err)
		}
		for _, got := range []RouteInfo{with, scanned} {
			if got.Key != plain.Key || !slices.Equal(got.SpillKeys, plain.SpillKeys) || got.RoutingTextLen != plain.RoutingTextLen {
				t.Fatalf("trial %d: with blocks key %x spill %x len %d; without %x %x %d",
					trial, got.Key, got.SpillKeys, got.RoutingTextLen, plain.Key, plain.SpillKeys, plain.RoutingTextLen)
			}
		}
	}
}
