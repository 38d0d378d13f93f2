package suitemain

import "testing"

// TestMain runs TestBesideRunsApart and TestBesideRunsApartToo in two
// other processes (Beside), which TestCollect collects.
func TestMain(m *testing.M) {
	Main(m, Beside("^TestBesideRunsApart$"), Beside("^TestBesideRunsApartToo$"))
}
