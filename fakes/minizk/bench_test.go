package minizk_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes/minizk"
)

// BenchmarkStart measures Start to a listening server and Close.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		s, err := minizk.Start()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartToSession measures Start until a raw client holds a
// session, then Close: what a test waits for before its first request.
func BenchmarkStartToSession(b *testing.B) {
	for b.Loop() {
		s, err := minizk.Start()
		if err != nil {
			b.Fatal(err)
		}
		c := dialRaw(b, s.Addr())
		c.mustConnect()
		_ = c.nc.Close()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
