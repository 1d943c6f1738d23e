// Command gencaps writes package history's capability combinations (see
// package capgen). Run it through go generate in package history.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/intentjobs/jobs/history/internal/capgen"
)

func main() {
	out := flag.String("o", "capabilities.go", "the file to write")
	flag.Parse()
	src, err := capgen.Source()
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencaps:", err)
		os.Exit(1)
	}
}
