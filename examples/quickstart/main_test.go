package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quick start is takeOrder, word for word, so that it
// compiles as written.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Quick start\n")
	_, after, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the README has no quick start in Go")
	}
	block, _, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("the README's quick start does not end")
	}
	if !strings.Contains(string(src), block) {
		t.Errorf("the README's quick start is not word for word in examples/quickstart/main.go:\n%s", block)
	}
}
