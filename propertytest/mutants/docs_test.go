package mutants

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docRow is a row of docs/mutants.md's table of mutants: its first cell.
var docRow = regexp.MustCompile(`(?m)^\| ([a-z0-9]+(?:-[a-z0-9]+)+) \|`)

// The pages that count the mutants or list them agree with the registry:
// docs/mutants.md has a row for each mutant and none for a mutant that is
// gone, and the README and that page give the registry's count.
func TestDocsListTheRegistry(t *testing.T) {
	page := readDoc(t, "../../docs/mutants.md")
	listed := map[string]bool{}
	for _, m := range docRow.FindAllStringSubmatch(page, -1) {
		listed[m[1]] = true
		if _, err := Lookup(m[1]); err != nil {
			t.Errorf("docs/mutants.md lists %q, which the registry does not hold", m[1])
		}
	}
	for _, m := range All() {
		if !listed[m.Name] {
			t.Errorf("docs/mutants.md has no row for the mutant %q", m.Name)
		}
	}
	count := fmt.Sprintf("%d", len(All()))
	if !strings.Contains(page, "The registry (`mutants.All()`) holds "+count+".") {
		t.Errorf("docs/mutants.md does not say the registry holds %s", count)
	}
	if readme := readDoc(t, "../../README.md"); !strings.Contains(readme, count+" deliberately broken locks") {
		t.Errorf("the README does not count %s deliberately broken locks", count)
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
