package mutants_test

import (
	"fmt"

	"github.com/lockproof/lockproof/propertytest/mutants"
)

// Look a mutant up by name, as lockproof check -locks mutant/<name> does,
// and see what it breaks. In a test, propertytest.Check(t, m.Factory,
// m.Options) must then report m.Breaks.
func Example() {
	m, err := mutants.Lookup("setnx-then-expire")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name, "breaks", m.Breaks)
	_, err = mutants.Lookup("sleep-sort")
	fmt.Println(err != nil)
	// Output:
	// setnx-then-expire breaks deadlock freedom
	// true
}
