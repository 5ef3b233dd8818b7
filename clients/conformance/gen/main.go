// Command gen writes clients/conformance/vectors.json from the Go reference
// implementation. Run it from the repository root:
//
//	go run ./clients/conformance/gen
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/prefixgate/prefixgate/clients/conformance"
)

func main() {
	out := flag.String("o", "clients/conformance/vectors.json", "file to write")
	flag.Parse()
	b, err := conformance.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
