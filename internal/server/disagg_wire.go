package server

import (
	"errors"
	"strconv"

	"github.com/tidwall/gjson"
)

// member is one top-level member a leg's body sets; a nil value removes
// the member.
type member struct {
	key   string
	value []byte
}

// withMembers returns a copy of the JSON object body with members set
// (replacing any of the same name, in their order, at the end) or
// removed (nil value). body is a canonical request: an object.
func withMembers(body []byte, members ...member) ([]byte, error) {
	top := gjson.ParseBytes(body)
	if !top.IsObject() {
		return nil, errors.New("request body is not a JSON object")
	}
	out := make([]byte, 0, len(body)+256)
	out = append(out, '{')
	top.ForEach(func(k, v gjson.Result) bool {
		for _, m := range members {
			if m.key == k.Str {
				return true
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, v.Raw...)
		return true
	})
	for _, m := range members {
		if m.value == nil {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// vllmPrefillBody is the prefill leg of vLLM's KV connector protocol: the
// request with max_tokens 1 (and max_completion_tokens 1 when it sets
// that), no stream, and kv_transfer_params asking the prefill worker to
// hold the KV for a remote decode, as vLLM's disaggregated proxy sends it.
func vllmPrefillBody(body []byte) ([]byte, error) {
	ms := []member{
		{"kv_transfer_params", []byte(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)},
		{"stream", []byte("false")},
		{"stream_options", nil},
		{"max_tokens", []byte("1")},
	}
	if gjson.GetBytes(body, "max_completion_tokens").Exists() {
		ms = append(ms, member{"max_completion_tokens", []byte("1")})
	}
	return withMembers(body, ms...)
}

// vllmDecodeBody is the decode leg: the request as the client sent it with
// the prefill answer's kv_transfer_params.
func vllmDecodeBody(body []byte, params []byte) ([]byte, error) {
	return withMembers(body, member{"kv_transfer_params", params})
}

// maxBatch bounds a batched SGLang request's bootstrap arrays.
const maxBatch = 4096

// sglangBatch is the batch size of a request as SGLang counts it: text
// (native /generate) or prompt (completions) a list of strings,
// input_ids a list of lists; 0 for a single input.
func sglangBatch(body []byte) int {
	r := gjson.GetManyBytes(body, "text", "input_ids", "prompt")
	switch {
	case r[0].IsArray():
		return len(r[0].Array())
	case r[1].IsArray() && r[1].Get("0").IsArray():
		return len(r[1].Array())
	case r[2].IsArray() && len(r[2].Array()) > 1 && (r[2].Get("0").Type == gjson.String || r[2].Get("0").IsArray()):
		return len(r[2].Array())
	}
	return 0
}

// sglangBody is both legs of SGLang's bootstrap protocol: the request with
// the prefill worker's bootstrap_host and bootstrap_port and the rooms
// (one, or one per input of a batch).
func sglangBody(body []byte, host string, port int, rooms []uint64) ([]byte, error) {
	h := strconv.AppendQuote(nil, host)
	p := strconv.AppendInt(nil, int64(port), 10)
	if len(rooms) == 1 && sglangBatch(body) == 0 {
		return withMembers(body, member{"bootstrap_host", h}, member{"bootstrap_port", p},
			member{"bootstrap_room", strconv.AppendUint(nil, rooms[0], 10)})
	}
	hs, ps, rs := []byte{'['}, []byte{'['}, []byte{'['}
	for i, room := range rooms {
		if i > 0 {
			hs, ps, rs = append(hs, ','), append(ps, ','), append(rs, ',')
		}
		hs, ps, rs = append(hs, h...), append(ps, p...), strconv.AppendUint(rs, room, 10)
	}
	return withMembers(body, member{"bootstrap_host", append(hs, ']')}, member{"bootstrap_port", append(ps, ']')},
		member{"bootstrap_room", append(rs, ']')})
}
