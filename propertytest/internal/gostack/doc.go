// Package gostack reads the function names of a goroutine dump, for the
// suite's scheduler (which tells lockproof's goroutines from the standard
// library's) and for the leak check of propertytest/suitemain.
package gostack
