package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quick start is takeOrder, word for word, so that it
// compiles as written.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	readmeMatches(t, "## Use a lock\n", "main.go")
}

// The README's Factory is the one propertytest's ExampleFactory runs, word
// for word, so that it compiles and passes as written.
func TestREADMEFactoryIsTheExample(t *testing.T) {
	readmeMatches(t, "## Test your own lock\n", "../../propertytest/example_test.go")
}

// readmeMatches fails t unless the first Go block under heading in the
// README appears word for word in the file src.
func readmeMatches(t *testing.T, heading, src string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), heading)
	if !ok {
		t.Fatalf("the README has no section %q", strings.TrimSpace(heading))
	}
	_, after, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("the README's %q has no Go block", strings.TrimSpace(heading))
	}
	block, _, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatalf("the README's %q block does not end", strings.TrimSpace(heading))
	}
	if !strings.Contains(string(code), block) {
		t.Errorf("the README's %q block is not word for word in %s:\n%s", strings.TrimSpace(heading), src, block)
	}
}
