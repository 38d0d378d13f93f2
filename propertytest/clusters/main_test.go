package clusters

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/lab"
)

// TestMain re-runs the tests inside a sandbox network namespace when the
// lab is available (LOCKPROOF_LAB=1, root), and fails the package if a
// test leaves a goroutine behind.
//
// It also keeps rapid from writing fail files (unless -rapid.nofailfile
// is given): a run on a real cluster does not replay from one (the
// servers' timers do not), and rapid replays every file under testdata
// first in each later Check, a stale one too, with the faults it struck.
func TestMain(m *testing.M) {
	lab.SandboxMain()
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.nofailfile" })
	if !given {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			fmt.Fprintf(os.Stderr, "clusters: -rapid.nofailfile: %v\n", err)
			os.Exit(2)
		}
	}
	fakes.VerifyNoLeaks(m)
}
