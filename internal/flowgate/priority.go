package flowgate

import (
	"bytes"
	"strconv"
)

// WithPriority returns body, a JSON object, with field set to value as the
// last member, so that it wins over a client's own (JSON parsers keep the
// last of duplicate names). body is not changed; ok is false when body is
// not an object, and body is returned as it is.
func WithPriority(body []byte, field string, value int) (out []byte, ok bool) {
	end := bytes.LastIndexByte(body, '}')
	start := bytes.IndexByte(body, '{')
	if start < 0 || end < start {
		return body, false
	}
	empty := len(bytes.TrimSpace(body[start+1:end])) == 0
	out = make([]byte, 0, len(body)+len(field)+24)
	out = append(out, body[:end]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, field...)
	out = append(out, `":`...)
	out = strconv.AppendInt(out, int64(value), 10)
	out = append(out, body[end:]...)
	return out, true
}
