package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/prefixgate/prefixgate/backends"
)

// fileDecoder reads a configuration file into Settings through Table.
type fileDecoder struct {
	path string
	s    *Settings
	// given records each key found, for messages about its value.
	given map[string]origin
}

// loadFile reads the YAML file at path into s; keys Table does not know
// are errors naming the key, its line and the closest known key.
func loadFile(path string, s *Settings, given map[string]origin) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return syntaxError(path, raw, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	d := fileDecoder{path: path, s: s, given: given}
	return d.mapping(doc.Content[0], "")
}

var yamlLine = regexp.MustCompile(`^yaml: (?:line \d+: )?`)

// syntaxError names the line where the parser found the problem. The
// parser's own message names the line where the enclosing block began
// ("line 1: did not find expected key" for a stray "- b" on line 2), so
// the line is the first whose inclusion makes the same error.
func syntaxError(path string, raw []byte, err error) error {
	msg := yamlLine.ReplaceAllString(err.Error(), "")
	lines := strings.SplitAfter(string(raw), "\n")
	for n := 1; n <= len(lines); n++ {
		var doc yaml.Node
		e := yaml.Unmarshal([]byte(strings.Join(lines[:n], "")), &doc)
		if e != nil && yamlLine.ReplaceAllString(e.Error(), "") == msg {
			return fmt.Errorf("%s:%d: %s", path, n, msg)
		}
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// mapping reads a mapping node whose keys start with prefix.
func (d *fileDecoder) mapping(n *yaml.Node, prefix string) error {
	where := strings.TrimSuffix(prefix, ".")
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return d.fail(n, where, wrongKind(n, "a mapping"))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := prefix + k.Value
		if first, dup := seen[k.Value]; dup {
			return d.fail(k, full, fmt.Sprintf("key already given on line %d", first))
		}
		seen[k.Value] = k.Line
		if e, ok := entryByKey(full); ok {
			d.given[e.Field] = origin{key: full, line: k.Line, path: d.path}
			if err := d.value(e, v); err != nil {
				return err
			}
			continue
		}
		if children := childKeys(full + "."); len(children) > 0 {
			if v.Tag == "!!null" {
				continue
			}
			if err := d.mapping(v, full+"."); err != nil {
				return err
			}
			continue
		}
		return d.fail(k, full, unknownKey(k.Value, prefix))
	}
	return nil
}

// unknownKey says which key was meant, or lists those under prefix.
func unknownKey(name, prefix string) string {
	names := childKeys(prefix)
	if best := closestKey(name, names); best != "" {
		return fmt.Sprintf("unknown key (did you mean %s%s?)", prefix, best)
	}
	where := "at the top level"
	if prefix != "" {
		where = "under " + strings.TrimSuffix(prefix, ".")
	}
	return fmt.Sprintf("unknown key; the keys %s are %s", where, strings.Join(names, ", "))
}

func (d *fileDecoder) fail(n *yaml.Node, key, msg string) error {
	if key == "" {
		return fmt.Errorf("%s:%d: %s", d.path, n.Line, msg)
	}
	return fmt.Errorf("%s:%d: %s: %s", d.path, n.Line, key, msg)
}

// wrongKind says what n is where want is wanted.
func wrongKind(n *yaml.Node, want string) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list where " + want + " is wanted"
	case yaml.MappingNode:
		return "a mapping where " + want + " is wanted"
	}
	return fmt.Sprintf("%q is not %s", n.Value, want)
}

// value reads the value of e's key.
func (d *fileDecoder) value(e Entry, v *yaml.Node) error {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v.Tag == "!!null" {
		return nil
	}
	f := field(d.s, e.Field)
	switch {
	case e.Key == "backends":
		list, err := backendSpecs(v)
		if err != nil {
			return fmt.Errorf("%s:%w", d.path, err)
		}
		f.Set(reflect.ValueOf(list))
		return nil
	case f.Kind() == reflect.Slice:
		list, err := scalars(v)
		if err != nil {
			return d.fail(v, e.Key, err.Error())
		}
		f.Set(reflect.ValueOf(list))
		return nil
	case f.Kind() == reflect.Map:
		m, err := scalarMap(v)
		if err != nil {
			return d.fail(v, e.Key, err.Error())
		}
		f.Set(reflect.ValueOf(m))
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return d.fail(v, e.Key, wrongKind(v, e.wants()))
	}
	if err := e.setString(d.s, v.Value); err != nil {
		return d.fail(v, e.Key, err.Error())
	}
	return nil
}

func scalars(v *yaml.Node) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s", wrongKind(v, "a list of strings"))
	}
	out := make([]string, 0, len(v.Content))
	for i, item := range v.Content {
		if item.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("entry %d: %s", i, wrongKind(item, "a string"))
		}
		out = append(out, item.Value)
	}
	return out, nil
}

func scalarMap(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s", wrongKind(v, "a mapping of strings"))
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || val.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: %s", k.Line, wrongKind(val, "a string"))
		}
		out[k.Value] = val.Value
	}
	return out, nil
}

// backendSpecs reads the backends list: each entry a spec string (a URL,
// host:port, dns://, srv:// or file:// source, optionally ENGINE+ as in
// "sglang+http://10.0.0.5:30000", ROLE+ as in "prefill+vllm+http://…")
// or a mapping with url, engine and role, which becomes the
// ROLE+ENGINE+URL spec the server and --backend take.
func backendSpecs(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%d: backends must be a list", n.Line)
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		switch item.Kind {
		case yaml.ScalarNode:
			out = append(out, item.Value)
		case yaml.MappingNode:
			spec, err := backendMapping(item, i)
			if err != nil {
				return nil, err
			}
			out = append(out, spec)
		default:
			return nil, fmt.Errorf("%d: backends[%d] is neither a URL nor a url/engine mapping", item.Line, i)
		}
	}
	return out, nil
}

func backendMapping(item *yaml.Node, i int) (string, error) {
	var url, engine, role string
	for j := 0; j+1 < len(item.Content); j += 2 {
		k, v := item.Content[j], item.Content[j+1]
		switch {
		case v.Kind != yaml.ScalarNode:
			return "", fmt.Errorf("%d: backends[%d].%s: %s", v.Line, i, k.Value, wrongKind(v, "a string"))
		case k.Value == "url":
			url = v.Value
		case k.Value == "engine":
			engine = v.Value
		case k.Value == "role":
			role = v.Value
		default:
			return "", fmt.Errorf("%d: backends[%d]: unknown key %q (have url, engine, role)", k.Line, i, k.Value)
		}
	}
	if url == "" {
		return "", fmt.Errorf("%d: backends[%d]: url is required", item.Line, i)
	}
	e, err := backends.ParseEngine(engine)
	if err != nil {
		return "", fmt.Errorf("%d: backends[%d].engine: %w", item.Line, i, err)
	}
	r, err := backends.ParseRole(role)
	if err != nil {
		return "", fmt.Errorf("%d: backends[%d].role: %w", item.Line, i, err)
	}
	pr, pe, rest, err := backends.SplitSpec(url)
	if err != nil {
		return "", fmt.Errorf("%d: backends[%d].url: %w", item.Line, i, err)
	}
	if pe != backends.EngineAuto && e != backends.EngineAuto {
		return "", fmt.Errorf("%d: backends[%d]: url names engine %s and engine says %s; give one", item.Line, i, pe, e)
	}
	if pr != backends.RoleBoth && r != backends.RoleBoth {
		return "", fmt.Errorf("%d: backends[%d]: url names role %s and role says %s; give one", item.Line, i, pr, r)
	}
	e, r = max(e, pe), max(r, pr)
	spec := rest
	if e != backends.EngineAuto {
		spec = e.String() + "+" + spec
	}
	if r != backends.RoleBoth {
		spec = r.String() + "+" + spec
	}
	return spec, nil
}

// entryByKey finds the entry of a file key.
func entryByKey(key string) (Entry, bool) {
	for _, e := range Table {
		if e.Key == key {
			return e, true
		}
	}
	return Entry{}, false
}

// childKeys lists the key segments directly under prefix ("" for the top
// level, "routing." for routing's), sorted.
func childKeys(prefix string) []string {
	set := map[string]bool{}
	for _, e := range Table {
		if rest, ok := strings.CutPrefix(e.Key, prefix); ok && e.Key != "" {
			set[strings.Split(rest, ".")[0]] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// closestKey returns the known key within a small edit distance of name.
func closestKey(name string, known []string) string {
	best, bestDist := "", max(1, len(name)/3)+1
	for _, k := range known {
		if d := EditDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance of a and b in bytes; a is cut
// to 64 bytes, since a name typed by a user (a key in a file, a flag, a
// command) is not bounded.
func EditDistance(a, b string) int {
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
