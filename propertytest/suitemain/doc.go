// Package suitemain is the TestMain of a package that runs propertytest:
// short rapid defaults, LOCKPROOF_DEEP=1 for long runs, and a
// goroutine-leak check at the end that knows the fakes' lingering
// goroutines.
//
//	func TestMain(m *testing.M) { suitemain.Main(m) }
//
// Main sets the defaults and checks for leaks; IgnorePackages,
// OnlyPackages and OnlyLockproof narrow that check for tests of
// third-party libraries. SetChecks and SetFlag change rapid's flags for
// one test; Deep and ChecksGiven tell what the command line asked for.
// Beside and Collect run the tests that keep real time and mostly wait in
// a second process of the test binary, so that their waits overlap the
// work of the tests that need the process to themselves.
//
// It lives apart from propertytest so that the suite's core imports no
// fake: this package imports lockproof's fakes for their leak allowances
// (a real Consul agent's port allocator, go-zookeeper's wedged loop,
// etcd's peer connections).
package suitemain
