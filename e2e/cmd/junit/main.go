// Command junit reads `go test -json` on stdin, passes it through to stdout
// as go test's usual text, and writes a JUnit XML report to the file named by
// its only argument. make e2e and make nightly pipe the suites through it.
// Its exit status is 1 when the report holds a failure, so a pipeline that
// loses go test's own status (a pipe without pipefail) still fails.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/ml-platform/ml-platform/e2e/junit"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ./... | junit REPORT.xml")
		os.Exit(2)
	}
	var raw bytes.Buffer
	// The text goes to stdout as it arrives, so a long suite shows progress.
	tee := io.TeeReader(os.Stdin, &raw)
	if err := passThrough(tee, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "junit:", err)
		os.Exit(2)
	}
	report, err := junit.Convert(&raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "junit:", err)
		os.Exit(2)
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "junit:", err)
		os.Exit(2)
	}
	if err := junit.Write(f, report); err != nil {
		fmt.Fprintln(os.Stderr, "junit:", err)
		os.Exit(2)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "junit:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "junit: %s: %d tests, %d failed, %d skipped\n", os.Args[1], report.Tests, report.Failures, report.Skipped)
	if report.Failures > 0 {
		os.Exit(1)
	}
}

// passThrough prints the Output of each JSON event, and any other line as it
// is, line by line.
func passThrough(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var e struct{ Output string }
		if err := dec.Decode(&e); err == io.EOF {
			return nil
		} else if err != nil {
			// Non-JSON lines (build errors) reach the report's stray
			// output; the decoder cannot resynchronise, so copy the rest.
			rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), r))
			_, werr := w.Write(rest)
			return werr
		}
		if _, err := io.WriteString(w, e.Output); err != nil {
			return err
		}
	}
}
