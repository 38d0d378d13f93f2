package zkfake_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/zkfake"
)

func TestStartZooKeeperAt(t *testing.T) {
	_, err := zkfake.Start(zkfake.At(faketest.ClosedAddr))
	faketest.WantStartError(t, "Start(At(closed))", err, faketest.ClosedAddr)
	z, err := zkfake.Start(zkfake.At(faketest.ClosedAddr), zkfake.ForceMinizk())
	if err != nil || z.Real() {
		t.Fatalf("Start(At, ForceMinizk): %v", err)
	}
	faketest.CloseOK(t, z)
}
