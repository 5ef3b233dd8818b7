package conformance

// Generated Responses, Messages and pooling bodies: the shapes their modes
// read (items, content blocks, cache_control at any depth, pooling
// members), now and then of the wrong type, so that the schema errors and
// their offsets are compared too.

// list writes an array of n (0..max-1) elements.
func (g *docGen) list(max int, elem func(i int)) func() {
	return func() {
		g.b.WriteByte('[')
		for i := range g.rng.IntN(max) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			elem(i)
		}
		g.b.WriteByte(']')
	}
}

// withCacheControl adds a cache_control member now and then.
func (g *docGen) withCacheControl(ms []func()) []func() {
	if g.chance(0.3) {
		ms = append(ms, g.member("cache_control", func() {
			g.members([]func(){g.member("type", func() { g.str("ephemeral") })})
		}))
	}
	return ms
}

// part writes a content part or block: text (of one of types), another
// object with a nested cache_control now and then, or a wrong value.
func (g *docGen) part(types []string) {
	switch r := g.rng.IntN(10); {
	case r < 6:
		g.members(g.withCacheControl([]func(){
			g.member("type", func() { g.str(g.pick(types)) }),
			g.member("text", g.text(false)),
		}))
	case r < 9:
		g.members(g.withCacheControl([]func(){
			g.member("type", func() { g.str(g.pick([]string{"image", "input_image", "tool_result", "document"})) }),
			g.member("source", func() { g.members(g.withCacheControl([]func(){g.member("data", g.text(false))})) }),
		}))
	default:
		g.value(3, 2)
	}
}

// message writes a message or item with a role; content a string, an
// array of parts, or (rarely) something else.
func (g *docGen) message(long bool, types []string) {
	var ms []func()
	if g.chance(0.95) {
		ms = append(ms, g.member("role", func() { g.str(g.pick([]string{"system", "developer", "user", "assistant"})) }))
	}
	switch r := g.rng.IntN(10); {
	case r < 5:
		ms = append(ms, g.member("content", g.text(long)))
	case r < 9:
		ms = append(ms, g.member("content", g.list(4, func(int) { g.part(types) })))
	default:
		ms = append(ms, g.member("content", func() { g.value(2, 2) }))
	}
	if g.chance(0.1) {
		ms = append(ms, g.member("type", func() { g.str("message") }))
	}
	g.members(ms)
}

func (g *docGen) responses(long bool) {
	ms := []func(){g.member("model", func() { g.str(g.pick([]string{"m", "gpt-oss-20b"})) })}
	if g.chance(0.5) {
		ms = append(ms, g.member("instructions", g.text(long)))
	}
	if g.chance(0.2) {
		ms = append(ms, g.member("tools", func() { g.value(1, 3) }))
	}
	if g.chance(0.3) {
		ms = append(ms, g.member("previous_response_id", func() { g.str("resp_" + g.pick([]string{"1", "2"})) }))
	}
	if g.chance(0.2) {
		ms = append(ms, g.member("background", func() { g.value(2, 1) }))
	}
	if g.chance(0.95) {
		ms = append(ms, g.member("input", func() {
			if g.chance(0.2) {
				g.text(long)()
				return
			}
			g.list(5, func(i int) {
				switch r := g.rng.IntN(10); {
				case r < 7:
					g.message(long && i == 0, []string{"input_text", "output_text", "text", "refusal"})
				case r < 9:
					g.members([]func(){
						g.member("type", func() { g.str(g.pick([]string{"function_call", "function_call_output", "reasoning"})) }),
						g.member("call_id", func() { g.str("call_1") }),
						g.member("output", g.text(false)),
					})
				default:
					g.value(2, 2)
				}
			})()
		}))
	}
	g.members(g.sampling(ms))
}

func (g *docGen) messages(long bool) {
	ms := []func(){g.member("model", func() { g.str("claude-compatible") })}
	ms = append(ms, g.member("max_tokens", func() { g.b.WriteString("64") }))
	if g.chance(0.7) {
		ms = append(ms, g.member("system", func() {
			if g.chance(0.4) {
				g.text(long)()
				return
			}
			g.list(3, func(int) { g.part([]string{"text"}) })()
		}))
	}
	if g.chance(0.3) {
		ms = append(ms, g.member("tools", g.list(3, func(int) {
			g.members(g.withCacheControl([]func(){g.member("name", g.text(false)), g.member("input_schema", func() { g.object(2, 2) })}))
		})))
	}
	if g.chance(0.2) {
		ms = append(ms, g.member("stop_sequences", func() { g.value(1, 2) }))
	}
	ms = g.withCacheControl(ms)
	if g.chance(0.95) {
		ms = append(ms, g.member("messages", g.list(5, func(i int) { g.message(long && i == 0, []string{"text", "input_text"}) })))
	}
	g.members(g.sampling(ms))
}

func (g *docGen) pooling(long bool) {
	ms := []func(){g.member("model", func() { g.str("e5") })}
	for _, name := range []string{"query", "text_1", "input", "documents", "text_2"} {
		switch r := g.rng.IntN(6); {
		case r < 1:
			ms = append(ms, g.member(name, g.text(long)))
		case r < 2:
			ms = append(ms, g.member(name, g.list(4, func(int) { g.value(2, 2) })))
		}
	}
	if g.chance(0.2) {
		ms = append(ms, g.member("top_n", func() { g.value(2, 1) }))
	}
	g.members(g.sampling(ms))
}

// ownMode gives a generated Responses, Messages or pooling body its own
// mode half the time, so that most of them are keyed in it.
func (g *docGen) ownMode(mode, own string) string {
	if g.chance(0.5) {
		return own
	}
	return mode
}
