package locks_test

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The package documentation (go doc ./locks) names every backend that has
// a sub-package here, and the harness beside them.
func TestDocNamesEveryBackend(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" || e.Name() == "testdata" {
			continue
		}
		if !strings.Contains(doc, e.Name()) {
			t.Errorf("the package documentation does not name %s", e.Name())
		}
	}
}
