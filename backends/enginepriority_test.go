package backends

import "testing"

func TestPriorityField(t *testing.T) {
	for _, tc := range []struct {
		e          Engine
		field      string
		lowerFirst bool
		ok         bool
	}{
		{EngineVLLM, "priority", true, true},
		{EngineSGLang, "priority", false, true},
		{EngineLlamaCpp, "", false, false},
		{EngineAuto, "", false, false},
	} {
		field, lower, ok := tc.e.PriorityField()
		if field != tc.field || lower != tc.lowerFirst || ok != tc.ok {
			t.Errorf("%v.PriorityField() = %q, %v, %v", tc.e, field, lower, ok)
		}
	}
}
