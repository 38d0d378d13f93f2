package gostack

import "testing"

// A package path is cut from a function's name by whole elements, with the
// runtime's escaping of a dot in the last one undone.
func TestFuncPackage(t *testing.T) {
	for _, c := range []struct {
		fn, pkg string
	}{
		{"github.com/a/b.(*T).m.func1", "github.com/a/b"},
		{"gopkg.in/yaml%2ev3.(*parser).parse", "gopkg.in/yaml.v3"},
		{"main.main", "main"},
		{"net/http.(*conn).serve", "net/http"},
		{"github.com/a/b.F[...]", "github.com/a/b"},
	} {
		if got := FuncPackage(c.fn); got != c.pkg {
			t.Errorf("FuncPackage(%q) = %q, want %q", c.fn, got, c.pkg)
		}
	}
}
