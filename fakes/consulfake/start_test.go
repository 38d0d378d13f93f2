package consulfake_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
)

func TestStartConsulChoosesItsServerByOption(t *testing.T) {
	t.Setenv(consulfake.EnvBin, "/nonexistent/consul")
	c, err := consulfake.Start()
	if err != nil || c.Real() {
		t.Fatalf("Start() with %s set: %v; want miniconsul", consulfake.EnvBin, err)
	}
	faketest.CloseOK(t, c)
	_, err = consulfake.Start(consulfake.ForceAgent())
	faketest.WantStartError(t, "Start(ForceAgent())", err, "Agent(bin)")
	_, err = consulfake.Start(consulfake.ForceAgent(), consulfake.ForceMiniconsul())
	faketest.WantStartError(t, "Start(both Force options)", err, "exclude each other")
	_, err = consulfake.Start(consulfake.Agent("/nonexistent/consul"))
	faketest.WantStartError(t, "Start(Agent(missing))", err, "no such file")
}
