package etcdfake_test

import (
	"errors"
	"os"
	"testing"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
)

func TestStartEtcdChecksItsEndpoints(t *testing.T) {
	t.Setenv(etcdfake.EnvEndpoints, "http://"+faketest.ClosedAddr)
	_, err := etcdfake.StartCluster(0)
	faketest.WantStartError(t, "StartCluster(0)", err, "at least one member")
	_, err = etcdfake.StartCluster(3, etcdfake.At("http://"+faketest.ClosedAddr, "http://"+faketest.ClosedAddr))
	faketest.WantStartError(t, "StartCluster(3) on one endpoint twice", err, "3 members needed, 1 endpoints given")
	// Start(At(an unreachable endpoint)) is TestEtcdUnreachableFailsClearly's
	// path (three seconds of wait): not repeated here.
	s, err := etcdfake.Start(etcdfake.At("http://"+faketest.ClosedAddr), etcdfake.ForceEmbedded())
	if err != nil || s.Real() {
		t.Fatalf("Start(At, ForceEmbedded): %v", err)
	}
	dir := s.Embedded(0).Config().Dir
	faketest.CloseOK(t, s)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the member's data directory %s after Close: %v, want it removed", dir, err)
	}
}
