package sim

import (
	"sync"

	"github.com/prefixgate/prefixgate/backends/vllmsim"
)

// Prompts are built from segments: a segment is a deterministic stream of
// words, each " xyz" (a space and three letters or digits), which the vllmsim
// tokenizer turns into exactly one token. So a segment of n tokens is 4n
// bytes of text, equal segment ids are equal text and equal tokens, and token
// ids can be produced from a table without building the text at all. Text is
// built only for the routing key, and only as far as the key reads it.

// Segment is Tokens words of the word stream ID.
type Segment struct {
	ID     uint64
	Tokens int
}

// Message is one chat message whose content is a run of segments.
type Message struct {
	Role    string
	Content []Segment
}

const (
	wordAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	numWords     = len(wordAlphabet) * len(wordAlphabet) * len(wordAlphabet)
	charsPerTok  = 4
)

var (
	wordsOnce  sync.Once
	wordTokens []vllmsim.Token
	tmplMu     sync.Mutex
	tmplTokens = map[string][]vllmsim.Token{}
)

func words() []vllmsim.Token {
	wordsOnce.Do(func() {
		wordTokens = make([]vllmsim.Token, numWords)
		var b [4]byte
		for i := range numWords {
			wordBytes(&b, i)
			t := vllmsim.Tokenize(string(b[:]))
			if len(t) != 1 {
				panic("sim: word is not one token: " + string(b[:]))
			}
			wordTokens[i] = t[0]
		}
	})
	return wordTokens
}

func wordBytes(b *[4]byte, i int) {
	n := len(wordAlphabet)
	b[0] = ' '
	b[1] = wordAlphabet[i/(n*n)]
	b[2] = wordAlphabet[i/n%n]
	b[3] = wordAlphabet[i%n]
}

// wordAt is the index of the j-th word of segment stream id.
func wordAt(id uint64, j int) int {
	return int(mix(id^mix(uint64(j)+0x632be59bd9b4e019)) % uint64(numWords))
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// appendSegTokens appends the tokens of s.
func appendSegTokens(dst []vllmsim.Token, s Segment) []vllmsim.Token {
	w := words()
	for j := range s.Tokens {
		dst = append(dst, w[wordAt(s.ID, j)])
	}
	return dst
}

// appendSegText appends the text of s, stopping once dst is limit bytes long.
func appendSegText(dst []byte, s Segment, limit int) []byte {
	var b [4]byte
	for j := 0; j < s.Tokens && len(dst) < limit; j++ {
		wordBytes(&b, wordAt(s.ID, j))
		dst = append(dst, b[:]...)
	}
	return dst
}

// segText returns the whole text of segments (tests and small bodies).
func segText(segs []Segment) string {
	var b []byte
	for _, s := range segs {
		b = appendSegText(b, s, 1<<62)
	}
	return string(b)
}

func tmpl(s string) []vllmsim.Token {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	t, ok := tmplTokens[s]
	if !ok {
		t = vllmsim.Tokenize(s)
		tmplTokens[s] = t
	}
	return t
}

// chatTokens returns the tokens of vllmsim.RenderChat(msgs) without
// rendering: the template pieces are tokenized once, the contents come from
// the word table. A test checks the equality.
func chatTokens(dst []vllmsim.Token, msgs []Message) []vllmsim.Token {
	dst = append(dst, tmpl("<|begin_of_text|>")...)
	for _, m := range msgs {
		dst = append(dst, tmpl("<|start_header_id|>"+m.Role+"<|end_header_id|>\n\n")...)
		for _, s := range m.Content {
			dst = appendSegTokens(dst, s)
		}
		dst = append(dst, tmpl("<|eot_id|>")...)
	}
	return append(dst, tmpl("<|start_header_id|>assistant<|end_header_id|>\n\n")...)
}

func segTokens(segs []Segment) int {
	n := 0
	for _, s := range segs {
		n += s.Tokens
	}
	return n
}

// renderChat is vllmsim.RenderChat over segment messages (tests).
func renderChat(msgs []Message) string {
	cm := make([]vllmsim.ChatMessage, len(msgs))
	for i, m := range msgs {
		cm[i] = vllmsim.ChatMessage{Role: m.Role, Content: segText(m.Content)}
	}
	return vllmsim.RenderChat(cm)
}
