package linearize

import (
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Searchers are reused from one Check to the next. On a history of a few
// dozen operations, allocating a searcher's tables (the event lists, the
// memo, the interner, the stack), and collecting them again, costs more
// than the search: reusing them is what lets such a check run in about
// the time of its steps. A searcher goes back only while its tables are
// small (poolMaxBytes), so that one big check leaves no big tables held
// between checks; sync.Pool lets go of the others at the next collections.

// searcherPools holds a *sync.Pool of idle searchers per instantiation of
// searcher (keyed by its reflect.Type).
var searcherPools sync.Map

// poolMaxBytes is the most a searcher's tables may hold for it to be kept
// for the next check.
const poolMaxBytes = 256 << 10

// poolOf returns the pool of idle searchers of type searcher[S, I, O].
func poolOf[S, I, O any]() *sync.Pool {
	t := reflect.TypeFor[searcher[S, I, O]]()
	if p, ok := searcherPools.Load(t); ok {
		return p.(*sync.Pool)
	}
	p, _ := searcherPools.LoadOrStore(t, new(sync.Pool))
	return p.(*sync.Pool)
}

// getSearcher returns a searcher over hist, an idle one if there is one:
// as newSearcher, with the buffers a previous check left.
func getSearcher[S, I, O any](m *filled[S, I, O], hist []Operation[I, O], b *budget, abort *atomic.Bool) *searcher[S, I, O] {
	if s, ok := poolOf[S, I, O]().Get().(*searcher[S, I, O]); ok {
		s.m, s.hist, s.b, s.abort = m, hist, b, abort
		s.states.hash, s.states.equal = m.Hash, m.Equal
		return s
	}
	return newSearcher(m, hist, b, abort)
}

// putSearcher gives s back for a later check, unless its tables are big.
// It drops what s refers to of the check (the model, the history, the
// states interned), so that an idle searcher keeps no caller's data alive.
func putSearcher[S, I, O any](s *searcher[S, I, O]) {
	s.drop()
	s.pausable = false
	if s.bytes() > poolMaxBytes {
		return
	}
	s.states.states.reset()
	clear(s.buf[:cap(s.buf)])
	s.m, s.hist, s.ops, s.b, s.abort, s.slow = nil, nil, nil, nil, nil, nil
	s.states.hash, s.states.equal = nil, nil
	s.pairs = nil
	s.trans = transitions{}
	poolOf[S, I, O]().Put(s)
}

// bytes is about what s's tables and buffers hold.
func (s *searcher[S, I, O]) bytes() int64 {
	var (
		zero S
		ev   event
		f    frame
	)
	n := s.footprint() + int64(cap(s.buf))*int64(unsafe.Sizeof(zero))
	n += 4 * int64(cap(s.next)+cap(s.prev)+cap(s.ids)+cap(s.alts)+cap(s.spent)+cap(s.marks)+cap(s.pool))
	n += 8 * int64(cap(s.zob)+cap(s.bits)+cap(s.reads))
	n += int64(unsafe.Sizeof(ev))*int64(cap(s.events)+cap(s.rets)) + int64(unsafe.Sizeof(f))*int64(cap(s.stack))
	return n
}
