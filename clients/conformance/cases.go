package conformance

import (
	"fmt"
	"strings"
)

func canon(name, mode, input string) testCase {
	return testCase{name: name, mode: mode, input: []byte(input)}
}

func withGroup(c testCase, group string) testCase { c.group = group; return c }

func withPrefix(c testCase, n int) testCase { c.prefix = n; return c }

func build(name, spec string) testCase {
	return testCase{name: name, kind: "build", mode: "chat", input: []byte(spec)}
}

// buildAs is a build case whose output is a request of mode: responses
// or messages.
func buildAs(name, mode, spec string) testCase {
	return testCase{name: name, kind: "build", mode: mode, input: []byte(spec)}
}

// longText returns n code points mixing 1- to 4-byte characters, so that
// character and byte windows differ.
func longText(n int) string {
	const unit = "Doc é€😀 text "
	rs := []rune(strings.Repeat(unit, n/len([]rune(unit))+1))
	return string(rs[:n])
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

const chatDoc = `{"model":"llama-3.1-8b","messages":[{"role":"system","content":"You answer from the report."},{"role":"user","content":"What grew?"}]}`

const fullSpec = `{
  "model": "llama-3.1-8b",
  "instructions": "Answer from the documents. Cite the document id.",
  "documents": [
    {"id": "q3", "title": "Quarterly report", "text": "Revenue grew 12% to $4.1M.\nCosts fell."},
    {"id": "memo-7", "title": "Memo", "text": "Hiring freeze until Q1."}
  ],
  "tools": [
    {"type": "function", "function": {"name": "lookup", "description": "Find a figure", "parameters": {"type": "object", "properties": {"metric": {"type": "string"}, "limit": {"type": "integer", "maximum": 1.0E2}}, "required": ["metric"]}}}
  ],
  "history": [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! Ask me about the report."}
  ],
  "question": "What grew?",
  "parameters": {"temperature": 0.0, "max_tokens": 64, "seed": 9007199254740993},
  "metadata": {"request_id": "req-0001", "ts": "2026-05-01T10:00:00Z"},
  "group": "tenant-a"
}`

const responsesDoc = `{
  "stream": true, "temperature": 0.2,
  "input": [
    {"role": "user", "content": [{"type": "input_text", "text": "Quarterly report: revenue grew 12%, caf\u00e9 sales \ud83d\ude00."}, {"type": "input_image", "image_url": "https://example.com/chart.png"}]},
    {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"metric\":\"revenue\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "4.1M"},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Revenue grew.", "annotations": []}]},
    {"role": "user", "content": "What about costs?"}
  ],
  "model": "llama-3.1-8b", "instructions": "Answer from the report.",
  "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}}}],
  "previous_response_id": "resp_0001", "background": false, "store": true, "metadata": {"trace": "abc"}, "max_output_tokens": 256
}`

const messagesDoc = `{"max_tokens":1024,"stop_sequences":["\n\nHuman:"],"messages":[` +
	`{"role":"user","content":[{"type":"text","text":"<report>Revenue grew 12%.</report>","cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},` +
	`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"metric":"costs"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Costs fell.","cache_control":{"type":"ephemeral"}}],"cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"user","content":"Summarize."}],"model":"claude-compatible",` +
	`"system":[{"type":"text","text":"You answer from the report \u00e9.","cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
	`"tools":[{"cache_control":{"type":"ephemeral"},"name":"lookup","description":"Find a figure","input_schema":{"type":"object"}}],` +
	`"metadata":{"user_id":"u-1"},"temperature":0.0,"stream":true}`

// responsesFullSpec is a full spec whose tools are in the Responses API's
// shape (the builder passes tools through as given).
const responsesFullSpec = `{
  "model": "llama-3.1-8b",
  "instructions": "Answer from the documents. Cite the document id.",
  "documents": [
    {"id": "q3", "title": "Quarterly report", "text": "Revenue grew 12% to $4.1M.\nCosts fell."},
    {"id": "memo-7", "title": "Memo", "text": "Hiring freeze until Q1."}
  ],
  "tools": [
    {"type": "function", "name": "lookup", "description": "Find a figure", "parameters": {"type": "object", "properties": {"metric": {"type": "string"}, "limit": {"type": "integer", "maximum": 1.0E2}}, "required": ["metric"]}}
  ],
  "history": [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! Ask me about the report."}
  ],
  "question": "What grew?",
  "parameters": {"temperature": 0.0, "max_output_tokens": 64, "seed": 9007199254740993, "stream": true},
  "metadata": {"request_id": "req-0001", "ts": "2026-05-01T10:00:00Z"},
  "group": "tenant-a"
}`

// messagesFullSpec is a full spec whose tools are in Anthropic's shape.
const messagesFullSpec = `{
  "model": "claude-compatible",
  "instructions": "Answer from the documents. Cite the document id.",
  "documents": [
    {"id": "q3", "title": "Quarterly report", "text": "Revenue grew 12% to $4.1M.\nCosts fell."}
  ],
  "tools": [
    {"name": "lookup", "description": "Find a figure", "input_schema": {"type": "object", "properties": {"metric": {"type": "string"}}, "required": ["metric"]}}
  ],
  "history": [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! Ask me about the report."}
  ],
  "question": "What grew?",
  "parameters": {"max_tokens": 1024, "temperature": 0.0, "stop_sequences": ["\n\nHuman:"], "stream": false},
  "metadata": {"user_id": "u-1"},
  "group": "tenant-a"
}`

func cases() []testCase {
	var cs []testCase
	for _, group := range [][]testCase{chatAndValueCases(), shapeCases(), modeCases(), rejectionCases(), buildCases(), quotedNameCases()} {
		cs = append(cs, group...)
	}
	return cs
}

// chatAndValueCases are chat bodies, strings, numbers and member order.
func chatAndValueCases() []testCase {
	return []testCase{
		// Chat bodies: layout, order, whitespace.
		canon("chat_basic", "auto", chatDoc),
		canon("chat_whitespace_and_order", "auto", " {\n\t\"messages\" : [ {\"content\":\"You answer from the report.\",\"role\":\"system\"} ,\r\n {\"role\":\"user\",\"content\":\"What grew?\"} ] ,\"model\" : \"llama-3.1-8b\" }\n"),
		canon("chat_top_level_order", "auto", `{"stream":true,"temperature":0.5,"messages":[{"role":"user","content":"hi"},{"role":"user","content":"q"}],"user":"u-1","model":"m","tools":[{"type":"function","function":{"name":"f"}}],"metadata":{"b":"1","a":"2"},"max_tokens":10,"prompt_cache_key":"g1","chat_template_kwargs":{"enable_thinking":false},"add_generation_prompt":true,"stream_options":{"include_usage":true},"store":false,"safety_identifier":"s","request_id":"r","service_tier":"auto","priority":1,"kv_transfer_params":null,"documents":[],"chat_template":"t","continue_final_message":false,"seed":1}`),
		canon("chat_metadata_first", "auto", `{"metadata":{"ts":"2026-05-01T10:00:00Z","trace":"abc"},"model":"m","messages":[{"role":"system","content":"Stable context."},{"role":"user","content":"q1"}]}`),
		canon("chat_metadata_changed", "auto", `{"metadata":{"ts":"2026-05-02T11:30:00Z","trace":"xyz"},"model":"m","messages":[{"role":"system","content":"Stable context."},{"role":"user","content":"q1"}]}`),
		canon("chat_other_question", "auto", `{"model":"m","messages":[{"role":"system","content":"Stable context."},{"role":"user","content":"a different question"}]}`),
		canon("chat_single_message", "auto", `{"model":"m","messages":[{"role":"user","content":"only one"}]}`),
		canon("chat_empty_messages", "auto", `{"model":"m","messages":[]}`),
		canon("chat_tools", "auto", `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","required":["city"],"properties":{"unit":{"enum":["c","f"],"type":"string"},"city":{"type":"string"}}}}}],"messages":[{"role":"system","content":"Use tools."},{"role":"user","content":"Weather in Oslo?"}]}`),
		canon("chat_tools_null", "auto", `{"model":"m","tools":null,"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`),
		canon("chat_tool_calls_history", "auto", `{"model":"m","messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"5C"},{"role":"user","content":"thanks"}]}`),
		canon("chat_multipart", "auto", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Look:"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}},"plain part",{"text":"no type"},{"type":"text","text":"end"},42,null]},{"role":"user","content":"q"}]}`),
		canon("chat_content_kinds", "auto", `{"model":"m","messages":[{"role":"user","content":null},{"role":"user","content":12.50},{"role":"user","content":{"b":1,"a":2}},{"content":"no role"},{"role":7,"content":"numeric role"},"not an object",[1],{"role":"user","content":"final"}]}`),
		canon("chat_model_not_string", "auto", `{"model":3,"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`),
		canon("chat_no_model", "auto", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`),
		withGroup(canon("chat_group_option", "auto", chatDoc), "tenant-b"),
		canon("chat_group_prompt_cache_key", "auto", `{"model":"llama-3.1-8b","prompt_cache_key":"tenant-b","messages":[{"role":"system","content":"You answer from the report."},{"role":"user","content":"What grew?"}]}`),
		withGroup(canon("chat_group_option_overrides_body", "auto", `{"model":"llama-3.1-8b","prompt_cache_key":"tenant-c","messages":[{"role":"system","content":"You answer from the report."},{"role":"user","content":"What grew?"}]}`), "tenant-b"),
		canon("chat_prompt_cache_key_not_string", "auto", `{"model":"m","prompt_cache_key":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`),
		withPrefix(canon("chat_long_spill", "auto", fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"q"}]}`, longText(9000))), 1024),
		withPrefix(canon("chat_window_exact", "auto", fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"q"}]}`, longText(1016))), 1024),
		withPrefix(canon("chat_window_plus_one", "auto", fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"q"}]}`, longText(1017))), 1024),

		// Strings.
		canon("string_astral", "auto", `{"text":"😀 𝄞 𠜎 👩‍👩‍👧‍👦 🇳🇴","escaped":"\ud83d\ude00\uD834\uDD1E"}`),
		canon("string_combining_marks", "auto", `{"composed":"é","decomposed":"é","escaped":"e\u0301","zalgo":"ḁ̴̛̗̹̒"}`),
		canon("string_right_to_left", "auto", `{"model":"m","messages":[{"role":"system","content":"שלום עולם — مرحبا بالعالم \u200f(RLM) \u202bembedded\u202c"},{"role":"user","content":"؟"}]}`),
		canon("string_escapes", "auto", `["\"\\\/\b\f\n\r\t","\u0000\u0001\u001f\u0020\u007f\u0080","\u00e9\u20ac\uFFFD\ufeff","\u2028\u2029","a\/b"]`),
		canon("string_raw_specials", "auto", "[\"\u007f raw DEL\",\"\u2028\u2029 raw separators\",\"\ufeff BOM\",\"\U0010FFFD max\"]"),
		canon("string_escaped_upper_hex", "auto", `"\u00C9\u00c9\u0041"`),
		canon("string_empty_and_spaces", "auto", `{"":"","  ":" ","a":"   "}`),

		// Numbers.
		canon("number_forms", "auto", `[1.0,1e-7,9007199254740993,-0,-0.0,1E2,0.1,1e21,1e20,100,0.000001,1e-6,0.0000001,-1.5e-10,2.5E+3,0e0,-0e-0,123.456,1.7976931348623157e308,5e-324,0e-400]`),
		canon("number_big_integers", "auto", `[9007199254740992,9007199254740993,-9007199254740993,123456789012345678901234567890,18446744073709551616,100000000000000000000000,0,-1]`),
		canon("number_shortest_round_trip", "auto", `[0.1,0.2,0.30000000000000004,3.141592653589793238462643383279,2.2250738585072014e-308,4.35,0.5e1,1.5e300,333333333.33333329,1e23,4.9406564584124654e-324,1.0000000000000002]`),
		canon("number_ecmascript_thresholds", "auto", `[1e20,1e21,123e18,123e19,1.5e-6,1.5e-7,0.00001234,1234.5e-10,-1e21,12345678901234567890.0]`),
		canon("number_exponent_case", "auto", `{"a":1E+2,"b":1e-2,"c":1E0,"d":25e-1}`),
		// The range rule: a double must hold the value finitely, and non-zero
		// as non-zero; integers inside the range stay exact.
		canon("number_range_edges", "auto", `[4.9406564584124654e-324,2.4703282292062328e-324,1.7976931348623158e308,-1.7976931348623157e308,0e-999999,-0.0e99999,0.`+strings.Repeat("0", 400)+`,1`+strings.Repeat("0", 308)+`,-17976931348623157`+strings.Repeat("0", 292)+`]`),
		// Long mantissas that an exponent brings back into range: every
		// digit before the point counts (Go's strconv.ParseFloat alone
		// counts at most 800 of them).
		canon("number_long_mantissa", "auto", `[1`+strings.Repeat("0", 800)+`e-800,1`+strings.Repeat("0", 900)+`1e-901,-12`+strings.Repeat("3", 1000)+`.5e-1000,0.`+strings.Repeat("0", 900)+`15e901]`),
		canon("invalid_number_long_mantissa_overflow", "auto", `[1`+strings.Repeat("2", 964)+`.5e-540]`),
		canon("invalid_number_underflow", "auto", `{"small":123.456e-789}`),
		canon("invalid_number_underflow_edge", "auto", `[5e-324,2.4703282292062327e-324]`),
		canon("invalid_number_underflow_long_fraction", "auto", `[0.`+strings.Repeat("0", 400)+`1]`),
		canon("invalid_number_big_integer", "auto", `{"n":`+strings.Repeat("9", 400)+`}`),
		canon("invalid_number_big_integer_309_digits", "auto", `[1,-2`+strings.Repeat("0", 308)+`]`),
		canon("invalid_number_overflow_edge", "auto", `[1.7976931348623159e308]`),

		// Member order.
		canon("order_utf16_vs_codepoint", "auto", `{"\ue000":1,"😀":2,"a":3,"é":4,"":5,"ﬀ":6,"𝄞":7,"\ufffd":8}`),
		canon("order_nested", "auto", `{"z":{"b":[{"y":1,"x":2}],"a":{"d":true,"c":false}},"a":null}`),
		canon("order_escaped_names", "auto", `{"\u0062":1,"a\u0000":2,"a":3,"\"q":4,"\\":5}`),
		canon("order_prefix_names", "auto", `{"abc":1,"ab":2,"a":3,"b":4,"aa":5}`),
		canon("order_case", "auto", `{"b":1,"B":2,"a":3,"A":4,"_":5,"0":6}`),
	}
}

// shapeCases are the other request shapes and modes, native among them.
func shapeCases() []testCase {
	return []testCase{
		// Other shapes and modes.
		canon("completion_string", "auto", `{"prompt":"Once upon a time","model":"gpt-oss","max_tokens":5,"user":"u"}`),
		canon("completion_array", "auto", `{"model":"m","prompt":["Hello ",[1,2,3],7,"world"],"suffix":"!","echo":false}`),
		canon("completion_long_spill", "auto", fmt.Sprintf(`{"model":"m","prompt":%q}`, longText(5000))),
		canon("completion_bad_prompt", "completion", `{"model":"m","temperature":1,"prompt":{"text":"x"}}`),
		canon("native_inputs", "auto", `{"parameters":{"max_new_tokens":20,"temperature":0.7},"inputs":"What is a KV cache?","stream":false}`),
		withPrefix(canon("native_long_cut_mid_character", "auto", fmt.Sprintf(`{"inputs":%q}`, longText(3000))), 1024),
		// Native keys leave out sampling parameters and volatile metadata:
		// each native_same_key_* group shares one key.
		canon("native_same_key_chat_a", "native", `{"model":"m","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"temperature":0.5,"user":"a"}`),
		canon("native_same_key_chat_b", "native", `{"model":"m","messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"temperature":0.9,"user":"b","stream":true}`),
		canon("native_same_key_chat_c", "native", `{"frequency_penalty":0.2,"metadata":{"ts":"2026-05-01T10:00:00Z"},"messages":[{"role":"system","content":"doc"},{"role":"user","content":"q"}],"model":"m","stream_options":{"include_usage":true}}`),
		canon("native_same_key_inputs_a", "auto", `{"inputs":"Summarize: the report","parameters":{"temperature":0.5,"max_new_tokens":10},"user":"a"}`),
		canon("native_same_key_inputs_b", "native", `{"stream":true,"parameters":{"top_k":5},"inputs":"Summarize: the report"}`),
		canon("native_same_key_completion_a", "native", `{"model":"m","prompt":"Once","suffix":"!","temperature":0,"user":"x"}`),
		canon("native_same_key_completion_b", "native", `{"model":"m","prompt":"Once","suffix":"!","temperature":1,"logprobs":3,"stream":true,"request_id":"r"}`),
		canon("native_same_key_unknown_a", "auto", `{"query":"stable","model":"m","user":"a","stream":false}`),
		canon("native_same_key_unknown_b", "native", `{"query":"stable","model":"m","user":"b","stream":true,"metadata":{"k":"v"},"priority":3,"kv_transfer_params":null}`),
		canon("native_unknown_escaped_names", "auto", `{"a\"b":1,"u\u0073er":2,"\\":3,"\u00e9":[1.0,{"y":1,"x":2}]}`),
		canon("native_unknown_volatile_only", "native", `{"user":"u","stream":true}`),
		canon("auto_unknown_schema", "auto", `{"z":1,"metadata":{"k":"v"},"a":2,"model":"m"}`),
		canon("auto_top_level_array", "auto", `[{"b":1,"a":2},"x",3]`),
		canon("auto_top_level_string", "auto", `"just a string"`),
		canon("auto_top_level_number", "auto", ` 1.50 `),
		canon("auto_top_level_literals", "auto", `[true,false,null]`),
		canon("auto_empty_containers", "auto", `{"a":{},"b":[],"c":[{}],"d":[[]]}`),
		canon("auto_depth_128", "auto", nested(128)),
		canon("mode_chat_on_prompt_body", "chat", `{"prompt":"p","model":"m","temperature":0}`),
		canon("mode_chat_explicit", "chat", `{"user":"u","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}],"model":"m"}`),
		canon("mode_completion_on_chat_body", "completion", `{"user":"u","messages":[{"role":"user","content":"q"}],"model":"m","prompt":"p"}`),
		canon("mode_native_on_chat_body", "native", `{"user":"u","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}],"model":"m","parameters":{},"inputs":"i"}`),
		canon("mode_native_on_array", "native", `[3,2,1]`),
		canon("mode_completion_no_prompt", "completion", `{"model":"m"}`),
	}
}

// modeCases are Responses, Messages and pooling bodies.
func modeCases() []testCase {
	return []testCase{
		// Responses, Messages and pooling bodies: order, routing text, schema errors.
		canon("responses_items", "responses", responsesDoc),
		canon("responses_other_question", "responses", strings.Replace(responsesDoc, "What about costs?", "And hiring?", 1)),
		canon("responses_previous_response_id", "responses", strings.Replace(responsesDoc, `"resp_0001"`, `"resp_0002"`, 1)),
		canon("responses_string_input", "responses", `{"input":"Tell me a story é😀","model":"m","user":"u","background":true}`),
		canon("responses_one_message", "responses", `{"input":[{"role":"user","content":"Tell me a story é😀"}],"model":"m"}`),
		canon("responses_nulls", "responses", `{"instructions":null,"tools":null,"previous_response_id":null,"input":[{"role":"developer","content":[{"type":"input_text","text":"a"},{"type":"text","text":"c"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":7}]},{"type":"reasoning","summary":[]},{"role":"user"}],"model":"m"}`),
		withPrefix(canon("responses_long_spill", "responses", fmt.Sprintf(`{"model":"m","instructions":%q,"input":[{"role":"user","content":"q"}]}`, longText(9000))), 1024),
		// A shared head and one different question each: one key.
		canon("responses_instructions_question_a", "responses", `{"model":"m","instructions":"Answer from the report.","input":[{"role":"user","content":"What grew?"}]}`),
		canon("responses_instructions_question_b", "responses", `{"model":"m","instructions":"Answer from the report.","input":[{"role":"user","content":"Who signed it é?"}]}`),
		canon("responses_instructions_string_input", "responses", `{"model":"m","instructions":"Answer from the report.","input":"When was it due?"}`),
		canon("responses_tools_lone_item", "responses", `{"model":"m","tools":[{"type":"function","name":"f"}],"input":[{"type":"function_call_output","call_id":"c1","output":"5C"}]}`),
		canon("responses_empty_instructions_lone_item", "responses", `{"model":"m","instructions":"","input":"q"}`),
		canon("responses_auto", "auto", `{"instructions":"Be brief.","input":[{"role":"user","content":"Hi"},{"role":"user","content":"Again"}],"model":"m"}`),
		canon("responses_auto_string", "auto", `{"input":"Hi","model":"m"}`),
		canon("responses_not_object", "responses", `"input"`),
		canon("responses_no_input", "responses", `{"model":"m","instructions":"i"}`),
		canon("responses_input_number", "responses", `{"model":"m","input":42}`),
		canon("responses_item_not_object", "responses", `{"model":"m","input":[{"role":"user","content":"a"},"b"]}`),
		canon("responses_item_content", "responses", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":{"x":"é"}}]}`),
		canon("responses_item_part", "responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"é"},"plain"]}]}`),
		canon("responses_item_role", "responses", `{"model":"m","input":[{"role":["user"],"content":"a"}]}`),
		canon("responses_item_kind", "responses", `{"model":"m","input":[{"call_id":"c1","output":"x"}]}`),
		canon("responses_item_type", "responses", `{"model":"m","input":[{"type":null}]}`),
		canon("responses_instructions_array", "responses", `{"model":"m","instructions":["i"],"input":"q"}`),
		canon("responses_previous_id_number", "responses", `{"model":"m","input":"q","previous_response_id":1}`),
		canon("responses_tools_object", "responses", `{"model":"m","tools":{"a":1},"input":"q"}`),
		canon("messages_cache_control", "messages", messagesDoc),
		canon("messages_cache_control_none", "messages", strings.ReplaceAll(strings.ReplaceAll(messagesDoc, `"cache_control":{"type":"ephemeral"},`, ""), `,"cache_control":{"type":"ephemeral","ttl":"1h"}`, "")),
		canon("messages_cache_control_escaped", "messages", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache\u005fcontrol":{"type":"ephemeral"}}],"tools":[{"name":"f","cache_control":{}}],"messages":[{"role":"user","content":[{"type":"image","source":{"data":"x","cache_control":1}}]},{"role":"user","content":"q"}]}`),
		canon("messages_string_system", "messages", `{"model":"m","max_tokens":16,"system":"Be brief é.","messages":[{"role":"user","content":"Hi"}]}`),
		canon("messages_system_question_b", "messages", `{"model":"m","max_tokens":16,"system":"Be brief é.","messages":[{"role":"user","content":"Who signed it?"}]}`),
		canon("messages_system_blocks_question", "messages", `{"model":"m","max_tokens":16,"system":[{"type":"text","text":"Be brief é.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"When?"}]}]}`),
		canon("messages_tools_lone_message", "messages", `{"model":"m","max_tokens":16,"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"q"}]}`),
		canon("messages_auto", "auto", `{"messages":[{"role":"user","content":"Hi"},{"role":"user","content":"Again"}],"system":"s","max_tokens":8,"model":"m"}`),
		canon("messages_auto_stop_sequences", "auto", `{"messages":[{"role":"user","content":"Hi"}],"stop_sequences":["x"],"max_tokens":8,"model":"m"}`),
		canon("messages_auto_chat_without_system", "auto", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"model":"m"}`),
		canon("messages_not_object", "messages", `[{"role":"user"}]`),
		canon("messages_no_messages", "messages", `{"model":"m","max_tokens":5,"system":"s"}`),
		canon("messages_messages_object", "messages", `{"model":"m","messages":{"role":"user"}}`),
		canon("messages_message_not_object", "messages", `{"model":"m","messages":[{"role":"user","content":"a"},null]}`),
		canon("messages_no_role", "messages", `{"model":"m","messages":[{"content":"x"}]}`),
		canon("messages_role_number", "messages", `{"model":"m","messages":[{"content":"x","role":1}]}`),
		canon("messages_no_content", "messages", `{"model":"m","messages":[{"role":"user"}]}`),
		canon("messages_content_null", "messages", `{"model":"m","messages":[{"role":"user","content":null}]}`),
		canon("messages_content_block", "messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"é"},"plain string block"]}]}`),
		canon("messages_system_number", "messages", `{"model":"m","system":7,"messages":[]}`),
		canon("messages_system_block", "messages", `{"model":"m","system":[{"type":"text","text":"s"},"t"],"messages":[]}`),
		canon("messages_tools_string", "messages", `{"model":"m","tools":"f","messages":[]}`),
		canon("pooling_rerank", "pooling", `{"top_n":2,"documents":["Paris is in France.","Berlin é.",{"text":"Rome"}],"query":"capital of France","model":"reranker"}`),
		canon("pooling_score", "pooling", `{"text_2":["a","b"],"text_1":"q","model":"scorer","encoding_format":"float"}`),
		canon("pooling_embeddings_tokens", "pooling", `{"input":[[1,2,3],"text",4,null],"model":"embedder","dimensions":256,"user":"u"}`),
		canon("pooling_chat_embeddings", "pooling", `{"messages":[{"role":"user","content":"hi"}],"model":"e"}`),
		withPrefix(canon("pooling_long_spill", "pooling", fmt.Sprintf(`{"model":"m","input":%q}`, longText(5000))), 1024),
		canon("pooling_auto_strings", "auto", `{"input":["first","second"],"model":"e5"}`),
		canon("pooling_auto_empty", "auto", `{"input":[],"model":"e5"}`),
		canon("pooling_auto_rerank", "auto", `{"query":"q","documents":["d"],"model":"r"}`),
		canon("pooling_auto_score", "auto", `{"text_1":"a","text_2":"b","model":"s"}`),
		canon("pooling_auto_query_alone", "auto", `{"query":"q","model":"r"}`),
		canon("pooling_no_input", "pooling", `{"model":"m","top_n":3}`),
		canon("pooling_not_object", "pooling", `3`),
	}
}

// rejectionCases are the documents every implementation must reject, and noncharacters.
func rejectionCases() []testCase {
	return []testCase{
		// Rejections, each with the byte offset of the problem.
		canon("invalid_empty", "auto", ``),
		canon("invalid_whitespace_only", "auto", " \n\t "),
		canon("invalid_trailing_comma_array", "auto", `[1,2,]`),
		canon("invalid_trailing_comma_object", "auto", `{"a":1,}`),
		canon("invalid_comment", "auto", `{"a":1 /* c */}`),
		canon("invalid_single_quote", "auto", `{'a':1}`),
		canon("invalid_leading_zero", "auto", `[01]`),
		canon("invalid_leading_zero_negative", "auto", `[-012]`),
		canon("invalid_lone_minus", "auto", `[-]`),
		canon("invalid_bare_fraction", "auto", `[.5]`),
		canon("invalid_dot_no_digits", "auto", `[1.]`),
		canon("invalid_exponent_no_digits", "auto", `[1e+]`),
		canon("invalid_plus_sign", "auto", `[+1]`),
		canon("invalid_nan", "auto", `[NaN]`),
		canon("invalid_infinity", "auto", `{"x":-Infinity}`),
		canon("invalid_hex_number", "auto", `[0x1F]`),
		canon("invalid_number_range", "auto", `[1, 1e400]`),
		canon("invalid_number_range_negative", "auto", `{"a":-2.5E+309}`),
		canon("invalid_escape", "auto", `["ok","\x41"]`),
		canon("invalid_short_unicode_escape", "auto", `["\u12"]`),
		canon("invalid_unicode_escape_digits", "auto", `["\u12G4"]`),
		canon("invalid_lone_high_surrogate", "auto", `{"a":"x\ud83dy"}`),
		canon("invalid_lone_low_surrogate", "auto", `["\ude00"]`),
		canon("invalid_reversed_surrogates", "auto", `["\ude00\ud83d"]`),
		canon("invalid_high_then_high", "auto", `["\ud83d\ud83d"]`),
		canon("invalid_control_character", "auto", "[\"tab\there\"]"),
		// Noncharacters (RFC 7493 §2.1), raw and escaped, and their neighbours.
		canon("string_noncharacter_neighbours", "auto", "[\"\ufdcf\ufdf0\ufffd\U0001FFFD\U0010FFFD\",\"\\uFDCF\\uFDF0\\uFFFD\\ud83f\\udffd\\udbff\\udffd\"]"),
		canon("invalid_noncharacter_fdd0_raw", "auto", "{\"a\":\"x\ufdd0\"}"),
		canon("invalid_noncharacter_fdef_escaped", "auto", `{"a":"x\uFDEF"}`),
		canon("invalid_noncharacter_fffe_raw", "auto", "[\"\ufffe\"]"),
		canon("invalid_noncharacter_ffff_escaped", "auto", `["ok","\uffff"]`),
		canon("invalid_noncharacter_1fffe_raw", "auto", "[\"a\U0001FFFE\"]"),
		canon("invalid_noncharacter_10ffff_raw", "auto", "[\"\U0010FFFF\"]"),
		canon("invalid_noncharacter_10ffff_escaped_pair", "auto", `["\udbff\udfff"]`),
		canon("invalid_noncharacter_1ffff_escaped_pair", "auto", `["\uD83F\uDFFF"]`),
		canon("invalid_noncharacter_member_name", "auto", `{"model":"m","messages":[],"x\ufdd5":1}`),
		canon("invalid_noncharacter_before_duplicate", "auto", `{"a":1,"a":"\ufffe"}`),
		canon("invalid_duplicate_top", "auto", `{"model":"a","messages":[],"model":"b"}`),
		canon("invalid_duplicate_nested", "auto", `{"a":{"x":1,"y":2,"x":3},"b":1}`),
		canon("invalid_duplicate_escaped", "auto", `{"a":1,"\u0061":2}`),
		canon("invalid_duplicate_first_repeat", "auto", `{"b":1,"a":2,"b":3,"a":4}`),
		canon("invalid_error_before_duplicate", "auto", `{"a":1,"a":2,"b":tru}`),
		canon("invalid_trailing_data", "auto", `{"a":1} {"b":2}`),
		canon("invalid_trailing_number", "auto", `12 34`),
		canon("invalid_literal", "auto", `[nul]`),
		canon("invalid_literal_suffix", "auto", `[truex]`),
		canon("invalid_truncated_literal", "auto", `[tr`),
		canon("invalid_unknown_word", "auto", `{"a":yes}`),
		canon("invalid_missing_colon", "auto", `{"a" 1}`),
		canon("invalid_missing_comma", "auto", `{"a":1 "b":2}`),
		canon("invalid_unterminated_string", "auto", `{"a":"abc`),
		canon("invalid_unterminated_object", "auto", `{"a":[1,2]`),
		canon("invalid_depth_129", "auto", nested(129)),
		canon("invalid_chat_mode_on_array", "chat", `[{"role":"user"}]`),
		canon("invalid_completion_mode_on_string", "completion", ` "prompt"`),
		{name: "invalid_utf8_byte", mode: "auto", input: []byte("{\"a\":\"ok \xff\"}")},
		{name: "invalid_utf8_overlong", mode: "auto", input: []byte("[\"\xc0\xaf\"]")},
		{name: "invalid_utf8_surrogate", mode: "auto", input: []byte("[\"\xed\xa0\x80\"]")},
		{name: "invalid_utf8_truncated", mode: "auto", input: []byte("[\"\xe2\x82\"]")},
		{name: "invalid_utf8_outside_string", mode: "auto", input: []byte("[1,\xc3\xa9]")},
	}
}

// buildCases are prompt specs for the build command, as chat, Responses and Messages requests.
func buildCases() []testCase {
	return []testCase{
		// Prompt specs for the build command.
		build("build_minimal", `{"model":"m","question":"Hi?"}`),
		build("build_full", fullSpec),
		build("build_full_other_metadata", strings.Replace(fullSpec, `"request_id": "req-0001", "ts": "2026-05-01T10:00:00Z"`, `"request_id": "req-9999", "ts": "2026-06-30T23:59:59Z", "user": "u-42"`, 1)),
		build("build_full_no_metadata", strings.Replace(fullSpec, `"metadata": {"request_id": "req-0001", "ts": "2026-05-01T10:00:00Z"},`, ``, 1)),
		build("build_full_other_group", strings.Replace(fullSpec, `"group": "tenant-a"`, `"group": "tenant-b"`, 1)),
		build("build_full_other_question", strings.Replace(fullSpec, `"question": "What grew?"`, `"question": "Who froze hiring?"`, 1)),
		build("build_documents_only", `{"model":"m","documents":[{"id":"a","title":"","text":"Alpha."},{"id":"b","text":"Beta."}],"question":"q"}`),
		build("build_instructions_only", `{"model":"m","instructions":"Be brief.","question":"q","history":[]}`),
		build("build_unicode", `{"model":"m","instructions":"Réponds en français 😀","documents":[{"id":"שלום","title":"e\u0301 \u0000","text":"\ud83d\ude00 \"quoted\" \\ back"}],"question":"¿Qué?","metadata":{"😀":"x","é":"y","\ue000":"z"}}`),
		build("build_tools_numbers", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"number","minimum":-0,"maximum":1e-7,"default":1.0}}}}},{"type":"function","function":{"name":"g"}}],"question":"q"}`),
		build("build_history", `{"model":"m","instructions":"sys","history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":""}],"question":"d"}`),
		build("build_parameters", `{"model":"m","question":"q","parameters":{"temperature":0.70,"top_p":1,"stop":["\n\n"],"logit_bias":{"50256":-100},"user":"u-1","stream":false}}`),
		build("build_invalid_json", `{"model":"m","question":"q",}`),

		// The same specs as Responses and Anthropic Messages requests.
		buildAs("build_responses_minimal", "responses", `{"model":"m","question":"Hi?"}`),
		buildAs("build_responses_full", "responses", responsesFullSpec),
		buildAs("build_responses_full_other_metadata", "responses", strings.Replace(responsesFullSpec, `"request_id": "req-0001", "ts": "2026-05-01T10:00:00Z"`, `"request_id": "req-9999", "ts": "2026-06-30T23:59:59Z", "user": "u-42"`, 1)),
		buildAs("build_responses_full_other_question", "responses", strings.Replace(responsesFullSpec, `"question": "What grew?"`, `"question": "Who froze hiring?"`, 1)),
		buildAs("build_responses_documents_only", "responses", `{"model":"m","documents":[{"id":"a","title":"","text":"Alpha."},{"id":"b","text":"Beta."}],"question":"q"}`),
		buildAs("build_responses_history", "responses", `{"model":"m","instructions":"sys","history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"developer","content":"c"},{"role":"assistant","content":""}],"question":"d","parameters":{"previous_response_id":"resp_1","store":true}}`),
		buildAs("build_responses_unicode", "responses", `{"model":"m","instructions":"Réponds en français 😀","documents":[{"id":"שלום","title":"e\u0301 \u0000","text":"\ud83d\ude00 \"quoted\" \\ back"}],"question":"¿Qué?","metadata":{"😀":"x","é":"y","\ue000":"z"},"group":"g"}`),
		buildAs("build_messages_minimal", "messages", `{"model":"m","question":"Hi?","parameters":{"max_tokens":16}}`),
		buildAs("build_messages_full", "messages", messagesFullSpec),
		buildAs("build_messages_full_other_metadata", "messages", strings.Replace(messagesFullSpec, `"user_id": "u-1"`, `"user_id": "u-2"`, 1)),
		buildAs("build_messages_full_other_group", "messages", strings.Replace(messagesFullSpec, `"group": "tenant-a"`, `"group": "tenant-b"`, 1)),
		buildAs("build_messages_documents_only", "messages", `{"model":"m","documents":[{"id":"a","title":"T","text":"Alpha."}],"question":"q","parameters":{"max_tokens":1}}`),
		buildAs("build_messages_tools_numbers", "messages", `{"model":"m","tools":[{"name":"f","input_schema":{"type":"object","properties":{"x":{"type":"number","minimum":-0,"maximum":1e-7,"default":1.0}}},"cache_control":{"type":"ephemeral"}}],"question":"q","parameters":{"max_tokens":8,"temperature":0.50}}`),
		buildAs("build_messages_unicode", "messages", `{"model":"m","instructions":"Réponds 😀","history":[{"role":"user","content":"\u2028\u0001"},{"role":"assistant","content":"ok"}],"question":"¿Qué?","parameters":{"max_tokens":4}}`),
		buildAs("build_messages_invalid_json", "messages", `{"model":"m","question":"q",}`),
		build("build_invalid_duplicate", `{"model":"m","question":"q","model":"n"}`),
	}
}

// quotedNameCases reach the quoting rule for names and literals in error
// messages: what is not printable ASCII, and names cut at 64 bytes.
func quotedNameCases() []testCase {
	dup := func(name, member string) testCase {
		return canon("invalid_duplicate_quoted_"+name, "auto", `{"`+member+`":1,"`+member+`":2}`)
	}
	long := strings.Repeat("n", 62)
	return []testCase{
		// Members written with JSON escapes, and as raw characters.
		dup("nbsp", `a\u00a0`),
		dup("nbsp_raw", "a\u00a0b"),
		dup("line_separator", `a\u2028b`),
		dup("line_separator_raw", "a\u2028"),
		dup("bom", `\ufeffmodel`),
		dup("bom_raw", "\ufeffmodel"),
		dup("controls", `\u0000\u0001\u0007\b\t\n\u000b\f\r\u001b\u001f`),
		dup("del_and_c1", `\u007f\u0080`+"\u009f"),
		dup("quote_backslash_slash", `a\"b\\c\/d`),
		dup("latin_cjk_rtl", "café名前שלום"),
		dup("astral", `😀\ud83d\ude00`),
		dup("private_use_unassigned", `\ue000\u0378\udb40\udc01`),
		dup("64_bytes", long+"é"),
		dup("cut_two_byte", long+"xé"),
		dup("cut_three_byte", long+"€"),
		dup("cut_four_byte", long+"😀"),
		dup("cut_escaped", strings.Repeat(`\u00e9`, 31)+`x\u00e9`),
		canon("invalid_number_range_long_literal", "auto", `[`+strings.Repeat("9", 70)+`e400]`),
	}
}
