package thirdparty_test

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// TestMain runs with the suite's short defaults (propertytest.Main). The
// go-redis v8 clients that amyangfei/redlock-go builds have no Close its
// user can reach: their pools' reapers stay behind.
func TestMain(m *testing.M) {
	propertytest.Main(m, propertytest.IgnorePackages("github.com/go-redis/redis/v8"))
}
