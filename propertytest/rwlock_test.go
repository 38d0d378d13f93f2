package propertytest

import (
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

func TestReadWriteValidated(t *testing.T) {
	if _, err := (Options{ReadWrite: true, Permits: 2, Clients: 3}).withDefaults(); err == nil {
		t.Error("ReadWrite with 2 permits accepted")
	}
	m, err := newMachine(Options{ReadWrite: true, Clients: 2, TTL: 1e9, Name: "x"}, &Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) { return fakes.NewMemLock(name, opts...) },
		Clock:     fakes.NewClock(epoch),
	}, 1)
	if err == nil || !strings.Contains(err.Error(), "ReadWriteLocker") {
		t.Errorf("a Locker that is no ReadWriteLocker: machine %v, err %v", m != nil, err)
	}
}
