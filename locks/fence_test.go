package locks_test

import (
	"errors"
	"testing"

	"github.com/lockproof/lockproof/locks"
)

func TestFenceRejectsStaleTokens(t *testing.T) {
	var f locks.Fence[int]
	if _, ok := f.Highest(); ok {
		t.Fatal("a new fence has seen no token")
	}
	if err := f.Write(5, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(5, 2); err != nil {
		t.Fatal("the same token may write again:", err)
	}
	if _, err := f.Read(4); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale read: %v", err)
	}
	if err := f.Write(4, 99); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale write: %v", err)
	}
	if v := f.Value(); v != 2 {
		t.Fatalf("value = %d after a refused write", v)
	}
	if s := f.Stats(); s.Accepted != 2 || s.Rejected != 2 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestFenceReadBlocksStaleWriteBack: a stale holder that read before a newer
// holder must not write back: the newer holder's read raised the bar.
func TestFenceReadBlocksStaleWriteBack(t *testing.T) {
	var f locks.Fence[int]
	old, _ := f.Read(1)
	cur, _ := f.Read(2)
	if err := f.Write(1, old+1); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale write-back after a newer read: %v", err)
	}
	if err := f.Write(2, cur+1); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(1); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatal("Admit accepted a stale token")
	}
	if h, _ := f.Highest(); h != 2 {
		t.Fatalf("highest = %v", h)
	}
}

func TestResolveAndValidate(t *testing.T) {
	o, err := locks.Resolve("p:")
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != locks.DefaultTTL || !o.Watchdog || o.Prefix != "p:" || o.RequestTimeout != locks.DefaultTTL/10 {
		t.Fatalf("defaults = %+v", o)
	}
	bad := map[string]struct {
		opt  locks.Option
		want error
	}{
		"ttl 0":         {locks.WithTTL(0), locks.ErrInvalidTTL},
		"ttl below min": {locks.WithTTL(locks.MinTTL - 1), locks.ErrInvalidTTL},
		"request ≥ ttl": {locks.WithRequestTimeout(locks.DefaultTTL), locks.ErrInvalidOption},
		"request 0":     {locks.WithRequestTimeout(0), locks.ErrInvalidOption},
		"nil clock":     {locks.WithClock(nil), locks.ErrInvalidOption},
		"negative wait": {locks.WithWaitBudget(-1), locks.ErrInvalidOption},
	}
	for name, c := range bad {
		if _, err := locks.Resolve("", c.opt); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	for _, name := range []string{"", "a\x00b", "a\tb", string([]byte{0xff}), string(make([]byte, locks.MaxNameLen+1))} {
		if err := locks.ValidateName(name); !errors.Is(err, locks.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	if err := locks.ValidateName("orders/42 — ok"); err != nil {
		t.Errorf("valid name refused: %v", err)
	}
	if a, b := locks.NewOwner(), locks.NewOwner(); a == b || len(a) != 32 {
		t.Errorf("owners %q %q: want distinct 32-hex values", a, b)
	}
}
