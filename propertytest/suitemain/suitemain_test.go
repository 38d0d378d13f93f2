package suitemain

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"
)

// Main's leak options, on goroutines really left running: a miniredis
// server nobody closed (a library's goroutines, none of whose frames is
// lockproof's) and a goroutine of this package's, blocked on a channel.
// IgnorePackages of miniredis and OnlyLockproof both pass over the
// server and still fail on the package's own goroutine; once that one
// ended, they pass while no option still fails.
func TestMainLeakOptions(t *testing.T) {
	base := goleak.IgnoreCurrent()
	srv, err := miniredis.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		<-stop
	}()
	find := func(opts ...Option) error {
		t.Helper()
		f, err := newConfig(opts)
		if err != nil {
			t.Fatal(err)
		}
		return f.find(0, base)
	}
	const own = "suitemain.TestMainLeakOptions"
	const lib = "github.com/alicebob/miniredis"
	err = find()
	if err == nil || !strings.Contains(err.Error(), own) || !strings.Contains(err.Error(), lib) {
		t.Fatalf("with no option, the leak check reported %v, want both leaked goroutines", err)
	}
	for name, opt := range map[string]Option{
		"IgnorePackages": IgnorePackages("github.com/alicebob/miniredis/v2"),
		"OnlyLockproof":  OnlyLockproof(),
	} {
		err := find(opt)
		if err == nil || !strings.Contains(err.Error(), own) {
			t.Fatalf("%s: the leak check reported %v, want this package's goroutine", name, err)
		}
		if strings.Contains(err.Error(), lib) {
			t.Fatalf("%s: the leak check reported miniredis's goroutines: %v", name, err)
		}
	}
	close(stop)
	<-ended
	for name, opt := range map[string]Option{
		"IgnorePackages": IgnorePackages("github.com/alicebob/"), // a parent path covers what is below it
		"OnlyLockproof":  OnlyLockproof(),
	} {
		if err := find(opt); err != nil {
			t.Fatalf("%s: only miniredis's goroutines are left, yet the leak check reported %v", name, err)
		}
	}
	if err := find(IgnorePackages("github.com/alicebob/mini")); err == nil {
		t.Fatal("IgnorePackages of github.com/alicebob/mini passed over github.com/alicebob/miniredis: a path matches whole elements only")
	}
}

// A goroutine is sorted by the packages of its functions, with the
// runtime's escaping of a dot undone; bad options are refused.
func TestLeakFilterMatching(t *testing.T) {
	f, err := newConfig([]Option{IgnorePackages("gopkg.in/yaml.v3")})
	if err != nil {
		t.Fatal(err)
	}
	if f.keeps([]string{"time.Sleep", "gopkg.in/yaml%2ev3.f"}) || !f.keeps([]string{"time.Sleep", LockproofModule + "/fakes.f"}) {
		t.Error("IgnorePackages(gopkg.in/yaml.v3) does not sort goroutines by that package")
	}
	for _, bad := range [][]Option{{IgnorePackages("")}, {OnlyPackages("/")}, {nil}} {
		if _, err := newConfig(bad); err == nil {
			t.Errorf("options %v accepted", bad)
		}
	}
	// A report in no form the filter reads is reported whole.
	if kept, ok := (&leakFilter{ignore: []string{"x"}}).kept("something else"); ok || kept != nil {
		t.Errorf("an unreadable report gave %q, %v", kept, ok)
	}
}
