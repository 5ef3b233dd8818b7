package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// field returns the Settings field at a dotted path.
func field(s *Settings, path string) reflect.Value {
	v := reflect.ValueOf(s).Elem()
	for name := range strings.SplitSeq(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}

var durationType = reflect.TypeFor[time.Duration]()

// setString sets e's field from a flag's or a variable's value; a list
// is comma-separated.
func (e Entry) setString(s *Settings, v string) error {
	if e.set != nil {
		return e.set(s, v)
	}
	f := field(s, e.Field)
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration like 250ms or 30s", v)
		}
		f.SetInt(int64(d))
		return nil
	case f.Kind() == reflect.Slice:
		f.Set(reflect.ValueOf(splitList(v)))
		return nil
	case f.Kind() == reflect.Pointer: // *int: set, even to 0
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		f.Set(reflect.ValueOf(&n))
		return nil
	}
	return setScalar(f, v)
}

// setScalar sets a string, bool, integer or float field from v.
func setScalar(f reflect.Value, v string) error {
	switch f.Kind() {
	case reflect.String:
		f.SetString(v)
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || f.OverflowInt(n) {
			return fmt.Errorf("%q is not an integer", v)
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("a %s is set only in the file", f.Kind())
	}
	return nil
}

// wants says what kind of value e's field takes, for messages and docs.
func (e Entry) wants() string {
	f := field(&Settings{}, e.Field)
	switch {
	case e.set != nil && e.Default != "true" && e.Default != "false":
		return "a string"
	case e.set != nil || f.Kind() == reflect.Bool:
		return "true or false"
	case f.Type() == durationType:
		return "a duration"
	case f.Kind() == reflect.Slice:
		return "a list"
	case f.Kind() == reflect.Map:
		return "a mapping"
	case f.Kind() == reflect.Float64:
		return "a number"
	case f.Kind() == reflect.String:
		return "a string"
	}
	return "an integer"
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
