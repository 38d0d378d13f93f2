package locktest

import (
	"flag"
	"strconv"
)

// WaitingParallel raises go test's -test.parallel to n, unless the command
// line set it, for a package whose parallel tests spend their time waiting
// in wall time (a session timeout, a reconnection back-off), not on a
// processor: the default, GOMAXPROCS, would run two such waits at a time
// on a 2-core machine. Call it from TestMain before m.Run. The tests that
// call t.Parallel must not share state: each starts its own server or
// works under a prefix of its own.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given || flag.Lookup("test.parallel") == nil {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		panic("locktest: " + err.Error())
	}
}
