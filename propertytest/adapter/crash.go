package adapter

import (
	"sync"

	"github.com/lockproof/lockproof/locks"
)

// WithCrash returns l with a Crash method (propertytest.Crasher's) that
// calls crash once: the hook that ends what the client started, as its
// process's death would (sever its connections, stop its keep-alives). It
// must not block on the backend. The returned Locker keeps l's RLocker
// method when l has one (a propertytest.ReadWriteLocker stays one). A nil
// crash returns l itself.
func WithCrash(l locks.Locker, crash func()) locks.Locker {
	if l == nil || crash == nil {
		return l
	}
	c := crasher{Locker: l, crash: &crashOnce{f: crash}}
	if rw, ok := l.(rLocker); ok {
		return rwCrasher{crasher: c, r: rw}
	}
	return c
}

// rLocker is the method of a read-write Locker that gives its shared
// side.
type rLocker interface{ RLocker() locks.Locker }

// crashOnce calls f at most once.
type crashOnce struct {
	once sync.Once
	f    func()
}

// crasher is a Locker with a crash hook.
type crasher struct {
	locks.Locker
	crash *crashOnce
}

var _ locks.Locker = crasher{}

// Crash calls the hook, once.
func (c crasher) Crash() { c.crash.once.Do(c.crash.f) }

// rwCrasher is a read-write Locker with a crash hook.
type rwCrasher struct {
	crasher
	r rLocker
}

var _ locks.Locker = rwCrasher{}

// RLocker returns the wrapped Locker's Locker of shared leases.
func (c rwCrasher) RLocker() locks.Locker { return c.r.RLocker() }
