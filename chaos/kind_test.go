package chaos_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"

	"github.com/lockproof/lockproof/chaos"
)

// Kinds lists every Kind constant kind.go declares, in order, each once.
func TestKindsListsEveryKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kind.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Kind" {
				for _, lit := range v.Values {
					declared = append(declared, lit.(*ast.BasicLit).Value)
				}
			}
		}
		return true
	})
	var listed []string
	for _, k := range chaos.Kinds() {
		listed = append(listed, `"`+string(k)+`"`)
	}
	if len(declared) < 11 || !slices.Equal(declared, listed) {
		t.Errorf("kind.go declares %v; Kinds lists %v", declared, listed)
	}
}
