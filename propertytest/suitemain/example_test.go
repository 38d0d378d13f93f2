package suitemain_test

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// A package whose tests drive a third-party lock runs them through Main,
// leaving out the goroutines of a client library that has no Close.
func ExampleMain() {
	testMain := func(m *testing.M) {
		suitemain.Main(m, suitemain.IgnorePackages("github.com/kvtools/valkeyrie"))
	}
	_ = testMain // in main_test.go: func TestMain(m *testing.M) { ... }
}

// A slow test runs fewer property checks than Main's default, unless the
// command line or LOCKPROOF_DEEP=1 asked for a number.
func ExampleSetChecks() {
	testSlow := func(t *testing.T) {
		suitemain.SetChecks(t, 3)
		// propertytest.Run(t, factory, options) now runs 3 checks.
	}
	_ = testSlow
}

// A package whose suite tests on an embedded etcd keep real time runs them
// in a second process, beside its manual-time tests, and collects them in
// a test of its own.
func ExampleBeside() {
	testMain := func(m *testing.M) {
		suitemain.Main(m, suitemain.Beside("^TestEtcd"))
	}
	testBeside := func(t *testing.T) { suitemain.Collect(t) }
	_, _ = testMain, testBeside // in main_test.go: func TestMain, func TestBeside
}
