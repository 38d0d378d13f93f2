package thirdparty_test

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// TestMain runs with the suite's short defaults (propertytest.Main).
func TestMain(m *testing.M) { propertytest.Main(m) }
