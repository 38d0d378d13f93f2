package minizk

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errShort is the decoding error of a record that ends before its last
// field: ZooKeeper's jute reader hits the end of the buffer (an EOF).
var errShort = errors.New("minizk: record truncated")

// reader decodes jute records (big-endian integers, length-prefixed strings
// and buffers, count-prefixed vectors) from one packet. The first error
// sticks: every later read returns zero values, so a decoder reads all its
// fields and checks err once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(errShort)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) int64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (r *reader) bool() bool {
	p := r.take(1)
	return p != nil && p[0] != 0
}

// length reads a length prefix: -1 is a null buffer or string (returned as
// -1); any other negative length, or one longer than what is left, is an
// error, as jute's checkLength makes it.
func (r *reader) length() int {
	n := r.int32()
	if r.err != nil {
		return 0
	}
	if n < -1 || int(n) > len(r.b) {
		r.fail(fmt.Errorf("minizk: unreasonable length %d", n))
		return 0
	}
	return int(n)
}

// buffer reads a byte buffer; a null buffer (length -1) reads as nil.
func (r *reader) buffer() []byte {
	n := r.length()
	if n <= 0 {
		if n == 0 && r.err == nil {
			return []byte{}
		}
		return nil
	}
	return append([]byte(nil), r.take(n)...)
}

// string reads a string; a null string reads as "" and sets *null.
func (r *reader) string() string {
	n := r.length()
	if n <= 0 {
		return ""
	}
	return string(r.take(n))
}

// count reads a vector's element count; each element takes at least min
// bytes, so a count the rest of the packet cannot hold is an error before
// anything is allocated. A null vector (-1) reads as 0.
func (r *reader) count(min int) int {
	n := r.int32()
	if r.err != nil || n == -1 {
		return 0
	}
	if n < 0 || int64(n)*int64(min) > int64(len(r.b)) {
		r.fail(fmt.Errorf("minizk: unreasonable vector length %d", n))
		return 0
	}
	return int(n)
}

func (r *reader) strings() []string {
	n := r.count(4)
	out := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

// writer encodes jute records into a growing buffer.
type writer struct{ b []byte }

func (w *writer) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// buffer writes p; a nil p is written as a null buffer (length -1), as
// jute writes a null byte array.
func (w *writer) buffer(p []byte) {
	if p == nil {
		w.int32(-1)
		return
	}
	w.int32(int32(len(p)))
	w.b = append(w.b, p...)
}

func (w *writer) string(s string) {
	w.int32(int32(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) strings(ss []string) {
	w.int32(int32(len(ss)))
	for _, s := range ss {
		w.string(s)
	}
}

func (w *writer) stat(st Stat) {
	w.int64(st.Czxid)
	w.int64(st.Mzxid)
	w.int64(st.Ctime)
	w.int64(st.Mtime)
	w.int32(st.Version)
	w.int32(st.Cversion)
	w.int32(st.Aversion)
	w.int64(st.EphemeralOwner)
	w.int32(st.DataLength)
	w.int32(st.NumChildren)
	w.int64(st.Pzxid)
}

func (w *writer) acls(acls []ACL) {
	w.int32(int32(len(acls)))
	for _, a := range acls {
		w.int32(a.Perms)
		w.string(a.Scheme)
		w.string(a.ID)
	}
}

func (r *reader) acls() []ACL {
	n := r.count(12)
	out := make([]ACL, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, ACL{Perms: r.int32(), Scheme: r.string(), ID: r.string()})
	}
	return out
}
