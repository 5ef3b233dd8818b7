package vllmsim

import "github.com/zeebo/xxh3"

// Token is a simulated token id: the low 32 bits of the XXH3 hash of the
// token's bytes.
type Token = uint32

// maxTokenBytes is the longest run of word bytes that forms one token; longer
// words are chunked into pieces of this many bytes.
const maxTokenBytes = 4

// Tokenize splits text into simulated tokens. It approximates a BPE tokenizer
// (about four bytes of English per token) and is deterministic, so equal
// prefixes of text give equal prefixes of tokens:
//
//   - A special token "<|...|>" (up to 64 bytes, no whitespace inside) is one
//     token, as in chat templates.
//   - A word is a run of ASCII letters and digits and of non-ASCII bytes. A
//     single space before a word belongs to the word's first token
//     (" hello"). Words are chunked into tokens of at most 4 bytes, the
//     leading space included.
//   - Every other byte (punctuation, newline, extra whitespace) is a token
//     of its own.
//
// Each token's id is the low 32 bits of xxh3 of its bytes.
func Tokenize(text string) []Token {
	return AppendTokens(make([]Token, 0, len(text)/3+1), text)
}

// AppendTokens appends the tokens of text to dst, as Tokenize does.
func AppendTokens(dst []Token, text string) []Token {
	i := 0
	n := len(text)
	for i < n {
		c := text[i]
		if c == '<' && i+1 < n && text[i+1] == '|' {
			if j := specialEnd(text, i); j > 0 {
				dst = append(dst, tokenID(text[i:j]))
				i = j
				continue
			}
		}
		start := i
		if c == ' ' && i+1 < n && isWordByte(text[i+1]) {
			i++ // the space joins the word's first token
		}
		if !isWordByte(text[i]) {
			dst = append(dst, tokenID(text[start:i+1]))
			i++
			continue
		}
		j := i
		for j < n && isWordByte(text[j]) {
			j++
		}
		for start < j {
			end := min(start+maxTokenBytes, j)
			dst = append(dst, tokenID(text[start:end]))
			start = end
		}
		i = j
	}
	return dst
}

func specialEnd(text string, i int) int {
	lim := min(len(text), i+64)
	for j := i + 2; j+1 < lim; j++ {
		switch text[j] {
		case ' ', '\n', '\t', '\r', '<':
			return 0
		case '|':
			if text[j+1] == '>' {
				return j + 2
			}
		}
	}
	return 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func tokenID(s string) Token { return Token(xxh3.HashString(s)) }
