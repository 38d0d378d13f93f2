package linearize

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decideLimit is the time limit of the checks a test expects to decide: a
// backstop against a search that never ends, far above what they take, so
// that a loaded machine (CI's race step) cannot turn a verdict into
// Unknown.
const decideLimit = 2 * time.Minute
