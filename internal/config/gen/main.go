// Command gen writes genq's configuration reference, docs/configuration.md,
// from the settings' declarations (internal/config). make configuration
// runs it from the repository's root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/genq/genq/internal/config"
)

func main() {
	out := flag.String("o", config.File, "file to write")
	flag.Parse()
	md, err := config.Markdown()
	if err == nil {
		err = os.WriteFile(*out, []byte(md), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
