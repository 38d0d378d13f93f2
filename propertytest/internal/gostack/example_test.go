package gostack_test

import (
	"fmt"

	"github.com/lockproof/lockproof/propertytest/internal/gostack"
)

// The package of a method's closure, as a goroutine dump names it.
func ExampleFuncPackage() {
	fmt.Println(gostack.FuncPackage("gopkg.in/yaml%2ev3.(*parser).parse.func1"))
	// Output: gopkg.in/yaml.v3
}
