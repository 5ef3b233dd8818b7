package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlKeys maps each key of a configuration document that File knows, as a
// dotted path (routing.policy), to its line.
type yamlKeys struct {
	lines map[string]int
	// atLine maps a line to the key whose value is on it, for the decoder's
	// errors, which name a line and a Go type but not the key.
	atLine map[int]string
}

// checkKeys walks a YAML document against File and returns its keys, or an
// error that names the first unknown key, its line and the closest known
// key. The decoder's own message for it names Go types ("field polcy not
// found in type config.Routing"), which an operator cannot act on.
func checkKeys(path string, raw []byte) (yamlKeys, error) {
	keys := yamlKeys{lines: map[string]int{}, atLine: map[int]string{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return keys, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return keys, nil
	}
	err := walkKeys(doc.Content[0], reflect.TypeOf(File{}), "", keys)
	if err != nil {
		return keys, fmt.Errorf("%s:%w", path, err)
	}
	return keys, nil
}

func walkKeys(n *yaml.Node, t reflect.Type, prefix string, keys yamlKeys) error {
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			fields[tag] = t.Field(i).Type
			names = append(names, tag)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := prefix + k.Value
		ft, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("%d: %s: unknown key", k.Line, full)
			if best := closestKey(k.Value, names); best != "" {
				msg += fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
			} else {
				sort.Strings(names)
				where := "at the top level"
				if prefix != "" {
					where = "under " + strings.TrimSuffix(prefix, ".")
				}
				msg += fmt.Sprintf("; the keys %s are %s", where, strings.Join(names, ", "))
			}
			return errors.New(msg)
		}
		keys.lines[full] = k.Line
		keys.atLine[v.Line] = full
		if err := walkKeys(v, ft, full+".", keys); err != nil {
			return err
		}
	}
	return nil
}

// closestKey returns the known key within a small edit distance of name.
func closestKey(name string, known []string) string {
	best, bestDist := "", max(1, len(name)/3)+1
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes; a is cut
// to 64 bytes, since a key in a file is not bounded.
func editDistance(a, b string) int {
	a = a[:min(len(a), 64)]
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var (
	decodeLine = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	// The decoder names Go types for unknown fields inside values that
	// unmarshal themselves ("field engin not found in type struct {...}").
	unknownField       = regexp.MustCompile(`field (\S+) not found in type .*$`)
	nestedDecodeErrors = regexp.MustCompile(`yaml: unmarshal errors:\s*line \d+: `)
	typeError          = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into (.+)$")
	kindError          = regexp.MustCompile(`^cannot unmarshal !!(\w+) into (.+)$`)
)

// goTypeNames says what a Go type a value failed to decode into wants.
var goTypeNames = map[string]string{
	"int": "an integer", "int64": "an integer", "float64": "a number", "bool": "true or false",
	"string": "a string", "[]string": "a list of strings", "map[string]string": "a mapping of strings",
}

// wantedValue says what a Go type a value failed to decode into wants.
func wantedValue(goType string) string {
	if w, ok := goTypeNames[goType]; ok {
		return w
	}
	if strings.HasPrefix(goType, "[]") {
		return "a list"
	}
	return "a mapping"
}

// decodeError rewrites the decoder's errors ("line 4: cannot unmarshal
// !!str `abc` into int") as PATH:LINE: KEY: what is wrong, one per line.
func decodeError(path string, err error, keys yamlKeys) error {
	var parts []string
	if te, ok := err.(*yaml.TypeError); ok {
		parts = te.Errors
	} else {
		// An unmarshaler's own error, which may wrap the decoder's:
		// one message, its inner "yaml: unmarshal errors: line N:" dropped.
		msg := nestedDecodeErrors.ReplaceAllString(err.Error(), "")
		parts = []string{strings.TrimPrefix(msg, "yaml: ")}
	}
	for i, p := range parts {
		m := decodeLine.FindStringSubmatch(p)
		if m == nil {
			parts[i] = path + ": " + p
			continue
		}
		line, _ := strconv.Atoi(m[1])
		msg := m[2]
		if t := typeError.FindStringSubmatch(msg); t != nil {
			msg = fmt.Sprintf("%q is not %s", t[1], wantedValue(t[2]))
		} else if t := kindError.FindStringSubmatch(msg); t != nil {
			got := map[string]string{"seq": "a list", "map": "a mapping"}[t[1]]
			if got == "" {
				got = "a " + t[1]
			}
			msg = fmt.Sprintf("%s where %s is wanted", got, wantedValue(t[2]))
		}
		msg = unknownField.ReplaceAllString(msg, `unknown key "$1"`)
		if key, ok := keys.atLine[line]; ok && !strings.HasPrefix(msg, key) {
			msg = key + ": " + msg
		}
		parts[i] = fmt.Sprintf("%s:%d: %s", path, line, msg)
	}
	return errors.New(strings.Join(parts, "\n"))
}

// KeyLine returns the line of a dotted key (routing.policy) in the
// configuration file at path, or 0 when the file cannot be read or lacks
// the key; error messages use it to point into the file.
func KeyLine(path, key string, read func(string) ([]byte, error)) int {
	raw, err := read(path)
	if err != nil {
		return 0
	}
	keys, err := checkKeys(path, raw)
	if err != nil {
		return 0
	}
	return keys.lines[key]
}
