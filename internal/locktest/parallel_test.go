package locktest

import (
	"flag"
	"testing"
)

func TestWaitingParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", before) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	WaitingParallel(7)
	want := "7"
	if given {
		want = before // the command line decides
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel %s after WaitingParallel(7), want %s (given on the command line: %v)", got, want, given)
	}
}
