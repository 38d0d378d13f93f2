package propertytest

import "testing"

// SetChecks lets the third-party adapter tests (package
// propertytest_test) lower or raise rapid's check count for one test, as
// setChecks does: not when -rapid.checks was given or LOCKPROOF_DEEP is set.
func SetChecks(t *testing.T, n int) { setChecks(t, n) }

// ChecksExplicit reports whether -rapid.checks was given on the command
// line.
func ChecksExplicit() bool { return checksExplicit }
