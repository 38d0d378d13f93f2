package mutants

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain keeps the default run short: unless given on the command line,
// rapid shrinks a failure for at most 0.5 s and writes no fail files (the
// seed every test prints replays it). It then fails the package if a test
// leaves a goroutine behind.
//
// TestEveryMutantIsCaught, the longest test, runs in a second process
// (suitemain.Beside), beside the others; TestBeside collects it.
func TestMain(m *testing.M) {
	flag.Parse()
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	seedGiven, checksGiven, shrinkGiven = given["rapid.seed"], given["rapid.checks"], given["rapid.shrinktime"]
	for name, v := range map[string]string{"rapid.shrinktime": "500ms", "rapid.nofailfile": "true"} {
		if !given[name] {
			if err := flag.Set(name, v); err != nil {
				panic(err)
			}
		}
	}
	suitemain.Main(m, suitemain.OwnRapidDefaults(), suitemain.Beside("^TestEveryMutantIsCaught$"))
}

// TestBeside collects the test TestMain runs in a second process.
func TestBeside(t *testing.T) { suitemain.Collect(t) }

// seedGiven, checksGiven and shrinkGiven record whether -rapid.seed,
// -rapid.checks and -rapid.shrinktime were given on the command line:
// they then win over the tests' choices.
var seedGiven, checksGiven, shrinkGiven bool

// deep reports whether LOCKPROOF_DEEP=1 asks for the long run.
func deep() bool { return os.Getenv("LOCKPROOF_DEEP") == "1" }

// useRapid sets rapid's seed and number of runs for one Check and logs
// the seed, so that the test can be replayed: the seed given with
// -rapid.seed, else seed, else (seed 0) a random one. checks is
// ignored when -rapid.checks was given. The flags are restored when the
// test ends.
func useRapid(t *testing.T, seed uint64, checks int) {
	t.Helper()
	switch {
	case seedGiven:
		var err error
		if seed, err = strconv.ParseUint(flag.Lookup("rapid.seed").Value.String(), 10, 64); err != nil {
			t.Fatal(err)
		}
	case seed == 0:
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		seed = binary.LittleEndian.Uint64(b[:]) >> 1
		fallthrough
	default:
		suitemain.SetFlag(t, "rapid.seed", strconv.FormatUint(seed, 10))
	}
	if !checksGiven {
		suitemain.SetFlag(t, "rapid.checks", strconv.Itoa(checks))
	}
	t.Logf("replay with: -run '^%s$' -rapid.seed=%d", t.Name(), seed)
}
