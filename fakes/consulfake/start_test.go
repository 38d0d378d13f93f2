package consulfake_test

import (
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"testing"
)

func TestStartConsulChoosesItsServerByOption(t *testing.T) {
	t.Setenv(consulfake.EnvBin, "/nonexistent/consul")
	c, err := consulfake.Start()
	if err != nil || c.Real() {
		t.Fatalf("StartConsul() with %s set: %v; want miniconsul", consulfake.EnvBin, err)
	}
	faketest.CloseOK(t, c)
	_, err = consulfake.Start(consulfake.ForceAgent())
	faketest.WantStartError(t, "StartConsul(ForceConsulAgent())", err, "ConsulAgent(bin)")
	_, err = consulfake.Start(consulfake.ForceAgent(), consulfake.ForceMiniconsul())
	faketest.WantStartError(t, "StartConsul(both Force options)", err, "exclude each other")
	_, err = consulfake.Start(consulfake.Agent("/nonexistent/consul"))
	faketest.WantStartError(t, "StartConsul(ConsulAgent(missing))", err, "no such file")
}
