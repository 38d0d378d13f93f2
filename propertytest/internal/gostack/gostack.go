package gostack

import "strings"

// FuncPackage returns the import path of the package of a function as a
// stack trace names it: "example.com/a/b.(*T).m" is in "example.com/a/b".
// The runtime writes a dot in the path's last element as %2e
// ("gopkg.in/yaml%2ev3.f"), which it turns back.
func FuncPackage(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		fn = fn[:slash+1+dot]
	}
	return strings.ReplaceAll(fn, "%2e", ".")
}
