package clusters

import "testing"

// TestOneStrike: a nemesis injected while another's member is struck gets
// that member's repair first, and the other's Heal then finds nothing to
// repair; a Heal repairs only its own strike.
func TestOneStrike(t *testing.T) {
	var one oneStrike
	repaired := ""
	one.set(KillLeader, func() error { repaired += "kill;"; return nil })
	if r := one.take(PauseLeader, false); r != nil {
		t.Fatal("the pause's Heal took the kill's repair")
	}
	r := one.take(PauseLeader, true)
	if r == nil {
		t.Fatal("injecting the pause while the kill is struck: no repair to run first")
	}
	if err := r(); err != nil || repaired != "kill;" {
		t.Fatalf("repair: %v, repaired %q", err, repaired)
	}
	if r := one.take(KillLeader, false); r != nil {
		t.Fatal("the kill's Heal found a repair its member already had")
	}
	one.set(PauseLeader, func() error { repaired += "pause;"; return nil })
	if r := one.take(PauseLeader, false); r == nil || r() != nil || repaired != "kill;pause;" {
		t.Fatalf("the pause's own Heal: repaired %q", repaired)
	}
	if r := one.take(IsolateLeader, true); r != nil {
		t.Fatal("a repair left after every strike was healed")
	}
}
