package zkfake_test

import (
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"testing"
)

func TestStartZooKeeperAt(t *testing.T) {
	_, err := zkfake.Start(zkfake.At(faketest.ClosedAddr))
	faketest.WantStartError(t, "StartZooKeeper(ZooKeeperAt(closed))", err, faketest.ClosedAddr)
	z, err := zkfake.Start(zkfake.At(faketest.ClosedAddr), zkfake.ForceMinizk())
	if err != nil || z.Real() {
		t.Fatalf("StartZooKeeper(ZooKeeperAt, ForceMinizk): %v", err)
	}
	faketest.CloseOK(t, z)
}
