package routes_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prefixgate/prefixgate/internal/routes"
)

// routeRow is the README path table's row of a route.
func routeRow(rt routes.Route) string {
	method, _, _ := strings.Cut(rt.Methods, ",")
	return "| `" + method + " " + rt.Path + "` | " + rt.Doc + " |"
}

// TestReadmeListsEveryRoute: the README's path table has one row per
// route of the table, as routeRow writes it, and no row for a REST path
// the table lacks.
func TestReadmeListsEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	single := regexp.MustCompile("^\\| `(GET|POST|PUT|DELETE|HEAD) /[^`]*` \\|")
	for line := range strings.SplitSeq(string(raw), "\n") {
		if single.MatchString(line) {
			rows[line] = true
		}
	}
	var want []string
	for _, rt := range routes.All() {
		row := routeRow(rt)
		want = append(want, row)
		if !rows[row] {
			t.Errorf("README lacks the row\n%s", row)
		}
		delete(rows, row)
	}
	for row := range rows {
		t.Errorf("README has a row for a path the route table lacks:\n%s", row)
	}
	if t.Failed() {
		t.Logf("the rows, in table order:\n%s", strings.Join(want, "\n"))
	}
}
