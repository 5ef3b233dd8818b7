package backends

// PriorityField is how an engine takes a request's scheduling priority in
// its OpenAI-compatible body, when it schedules by priority: the field's
// name, and whether a lower value is served first. ok is false for an
// engine that takes none.
//
//   - vLLM (--scheduling-policy priority): "priority", lower first; it
//     refuses a non-zero value when started without that policy.
//   - SGLang (--enable-priority-scheduling): "priority", higher first
//     unless started with --schedule-low-priority-values-first.
//   - llama.cpp: none.
func (e Engine) PriorityField() (field string, lowerFirst, ok bool) {
	switch e {
	case EngineVLLM:
		return "priority", true, true
	case EngineSGLang:
		return "priority", false, true
	}
	return "", false, false
}
