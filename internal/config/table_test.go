package config

import (
	"flag"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the settings table in docs/configuration.md")

// leafFields lists the fields of t, dotted, descending into the owning
// packages' config structs (server.Config, route.Config, backends.Options, pipeline.Config).
func leafFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
			out = append(out, leafFields(f.Type, prefix+f.Name+".")...)
			continue
		}
		out = append(out, prefix+f.Name)
	}
	return out
}

// TestTableCoversConfigFields: every field of the owning config structs is
// set by an entry of Table or listed in Internal, and every entry and
// Internal name is a field.
func TestTableCoversConfigFields(t *testing.T) {
	fields := leafFields(reflect.TypeFor[Settings](), "")
	inTable := map[string]bool{}
	for _, e := range Table {
		inTable[e.Field] = true
	}
	known := map[string]bool{}
	for _, f := range fields {
		known[f] = true
		if !inTable[f] && Internal[f] == "" {
			t.Errorf("field %s has no entry in Table and is not listed in Internal", f)
		}
		if inTable[f] && Internal[f] != "" {
			t.Errorf("field %s is both in Table and in Internal", f)
		}
	}
	for f := range inTable {
		if !known[f] {
			t.Errorf("Table names %s, which is no settings field", f)
		}
	}
	for f := range Internal {
		if !known[f] {
			t.Errorf("Internal names %s, which is no settings field", f)
		}
	}
}

// TestTableNamesAreUnique: a key, a variable and, per command, a flag
// name one setting each, spelled as the others are.
func TestTableNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	check := func(kind, name string, re *regexp.Regexp) {
		if name == "" {
			return
		}
		if seen[kind+name] {
			t.Errorf("%s %s is in Table twice", kind, name)
		}
		seen[kind+name] = true
		if !re.MatchString(name) {
			t.Errorf("%s %q is not spelled like the others", kind, name)
		}
	}
	for _, e := range Table {
		check("key", e.Key, regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)?$`))
		check("variable", e.Env, regexp.MustCompile(`^PREFIXGATE_[A-Z0-9_]+$`))
		for _, c := range []Cmd{Serve, EPP} {
			if e.Cmds&c != 0 {
				check("flag of command "+string(rune('0'+c)), e.Flag, regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`))
			}
		}
		if e.Doc == "" {
			t.Errorf("%s: no doc line", e.Field)
		}
		if e.Flag != "" && e.Cmds == 0 || e.Flag == "" && e.Cmds != 0 {
			t.Errorf("%s: a flag needs the commands that have it, and only a flag", e.Field)
		}
	}
}

const (
	docPath    = "../../docs/configuration.md"
	tableStart = "<!-- settings table: go test ./internal/config -run TestDoc -update writes it from the table -->\n"
	tableEnd   = "<!-- end of settings table -->\n"
)

// TestDocMatchesTable: docs/configuration.md carries Markdown() as it is,
// and its example file uses every key of the table and no other.
func TestDocMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	before, rest, ok1 := strings.Cut(doc, tableStart)
	got, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no settings table between %q and %q", docPath, tableStart, tableEnd)
	}
	if want := Markdown(); got != want {
		if *update {
			if err := os.WriteFile(docPath, []byte(before+tableStart+want+tableEnd+after), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the settings table in %s differs from Table; run go test ./internal/config -run TestDoc -update\n got:\n%s\nwant:\n%s", docPath, got, want)
	}
	checkExample(t, doc)
}

// checkExample loads the doc's complete example and checks it names every
// key of the table.
func checkExample(t *testing.T, doc string) {
	_, rest, _ := strings.Cut(doc, "## A complete example\n\n```yaml\n")
	example, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("no complete example")
	}
	p := write(t, example)
	var s Settings
	if err := loadFile(p, &s, map[string]origin{}); err != nil {
		t.Fatalf("the complete example: %v", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(example), &root); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(root.Content[0], "", keys)
	for _, e := range Table {
		if e.Key != "" && !keys[e.Key] {
			t.Errorf("the complete example leaves out %s", e.Key)
		}
	}
}

func collectKeys(n *yaml.Node, prefix string, keys map[string]bool) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := prefix + n.Content[i].Value
		keys[k] = true
		if _, ok := entryByKey(k); !ok {
			collectKeys(n.Content[i+1], k+".", keys)
		}
	}
}

// TestLimitSettingsHaveEveryName: each limit the server refuses a request
// for is named by its flag, key and variable, and Load hands the server
// that naming.
func TestLimitSettingsHaveEveryName(t *testing.T) {
	for field, want := range map[string]string{
		"Pipeline.MaxBodyBytes":    "--max-body-bytes, limits.max_body_bytes, PREFIXGATE_MAX_BODY_BYTES",
		"Pipeline.MaxDecodedBytes": "--max-decoded-bytes, limits.max_decoded_bytes, PREFIXGATE_MAX_DECODED_BYTES",
		"Pipeline.MaxRatio":        "--max-ratio, limits.max_ratio, PREFIXGATE_MAX_RATIO",
		"Pipeline.MaxDepth":        "--max-depth, limits.max_depth, PREFIXGATE_MAX_DEPTH",
		"Pipeline.MaxStringBytes":  "--max-string-bytes, limits.max_string_bytes, PREFIXGATE_MAX_STRING_BYTES",
	} {
		if got := SettingName(field); got != want {
			t.Errorf("SettingName(%s) = %q, want %q", field, got, want)
		}
	}
	s, err := load(t, "", nil, "--backend", "http://a:1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Server.Pipeline.SettingName == nil || s.Server.Pipeline.SettingName("MaxDepth") != SettingName("Pipeline.MaxDepth") {
		t.Error("Load does not hand the server the table's names")
	}
}
