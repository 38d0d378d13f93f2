package suitemain

import "testing"

// TestMain runs this package's tests through its own Main.
func TestMain(m *testing.M) { Main(m) }
