package normalize

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors classify every error this package returns, so that a
// server can map them with errors.Is: ErrTooLarge to 413, ErrUnsupportedEncoding
// to 415, the rest to 400.
var (
	// ErrInvalid marks input that breaks the JSON grammar or the I-JSON rules.
	ErrInvalid = errors.New("invalid json")
	// ErrTooLarge marks a body (encoded or decoded) over its size limit.
	ErrTooLarge = errors.New("body too large")
	// ErrTooDeep marks nesting deeper than the depth limit.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrTooLong marks a string or number literal over the length limit.
	ErrTooLong = errors.New("string too long")
	// ErrSchema marks a valid JSON body whose shape does not fit the request
	// mode (for example a chat request without a messages array).
	ErrSchema = errors.New("request schema mismatch")
	// ErrBadOption marks an out-of-range option, such as the prefix length
	// or an explicit group id.
	ErrBadOption = errors.New("invalid option")
	// ErrUnsupportedEncoding marks an unknown Content-Encoding.
	ErrUnsupportedEncoding = errors.New("unsupported content encoding")
	// ErrCompressionRatio marks a compressed body that expands more than the
	// ratio limit allows: a likely compression bomb. It also matches
	// ErrTooLarge.
	ErrCompressionRatio = errors.New("compression ratio over limit")
	// ErrCorrupt marks a compressed body that cannot be decoded.
	ErrCorrupt = errors.New("corrupt compressed body")
)

// Stable reason codes, for metrics labels and golden files.
const (
	CodeUnexpectedEnd    = "unexpected-end"
	CodeInvalidCharacter = "invalid-character"
	CodeInvalidLiteral   = "invalid-literal"
	CodeComment          = "comment"
	CodeSingleQuote      = "single-quote"
	CodeTrailingComma    = "trailing-comma"
	CodeTrailingData     = "trailing-data"
	CodeInvalidUTF8      = "invalid-utf8"
	CodeControlCharacter = "control-character"
	CodeInvalidEscape    = "invalid-escape"
	CodeLoneSurrogate    = "lone-surrogate"
	CodeNoncharacter     = "noncharacter"
	CodeInvalidNumber    = "invalid-number"
	CodeLeadingZero      = "leading-zero"
	CodeNumberRange      = "number-range"
	CodeDuplicateMember  = "duplicate-member"
	CodeDepthLimit       = "depth-limit"
	CodeSizeLimit        = "size-limit"
	CodeStringLimit      = "string-limit"
	CodeSchema           = "schema"
	CodePrefixLength     = "prefix-length"
	CodeInvalidGroup     = "invalid-group"
	CodeInvalidScope     = "invalid-scope"
	CodeUnsupportedEnc   = "unsupported-encoding"
	CodeCompressionRatio = "compression-ratio"
	CodeDecodedSize      = "decoded-size-limit"
	CodeCorrupt          = "corrupt-encoding"
)

// SyntaxError reports why and where a body was rejected. Offset is the
// 0-based byte offset into the input given to the function that failed.
type SyntaxError struct {
	Offset int64
	Reason string

	code string
	kind error
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Reason) }

// Code returns the stable reason code, for example "duplicate-member".
func (e *SyntaxError) Code() string { return e.code }

// Unwrap returns the class of the error: ErrInvalid, ErrTooLarge,
// ErrTooDeep, ErrTooLong or ErrSchema.
func (e *SyntaxError) Unwrap() error { return e.kind }

func newErr(off int, code string, kind error, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: int64(off), Reason: fmt.Sprintf(format, args...), code: code, kind: kind}
}

// optionError reports an out-of-range option.
type optionError struct {
	code string
	msg  string
}

func (e *optionError) Error() string { return e.msg }
func (e *optionError) Code() string  { return e.code }
func (e *optionError) Unwrap() error { return ErrBadOption }

// ErrorCode returns the stable reason code of any error from this package,
// "" for nil, and "other" for an error that did not come from here.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return "other"
}

// quoteShort quotes a member name or a number literal for an error
// message, by the rule the SDKs follow byte for byte (docs/normalize.md,
// "Names in error messages"): at most its first 64 bytes, cut back to the
// start of a character, written as strconv.QuoteToASCII writes them, then
// "..." when it was cut. Only ASCII is shown as itself, so that invisible
// characters show, and no Unicode table (which differs between languages
// and versions) decides what is printable.
func quoteShort(s []byte) string { return QuoteName(string(s)) }

// QuoteName quotes a member name for an error message by the rule the Go,
// Python and TypeScript SDKs share (docs/normalize.md, "Names in error
// messages"), so that one name reads the same in each.
func QuoteName(name string) string {
	const max = 64
	if len(name) <= max {
		return strconv.QuoteToASCII(name)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(name[:cut]) + "..."
}
