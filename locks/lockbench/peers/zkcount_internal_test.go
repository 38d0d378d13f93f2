package peers

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// packet returns a length-prefixed packet whose body starts with the
// given 32-bit words and is padded to size bytes.
func packet(size int, words ...int32) []byte {
	body := make([]byte, max(size, 4*len(words)))
	for i, w := range words {
		binary.BigEndian.PutUint32(body[4*i:], uint32(w))
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// The scanner finds every packet's header however the stream is cut: into
// single bytes, random pieces, or all at once; packets shorter than the
// header and empty ones included.
func TestFrameScannerAnyCut(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(packet(44, 0, 0))           // a handshake
	stream.Write(packet(12, 7, 1))           // xid 7, create
	stream.Write(packet(0))                  // empty
	stream.Write(packet(2))                  // shorter than the header
	stream.Write(packet(8, -2, 11))          // ping
	stream.Write(packet(900, 9, 2))          // delete with a long body
	stream.Write(packet(16, -1, -1))         // a notification
	want := []int32{0, 7, -1, -1, -2, 9, -1} // xids; -1 also for "no header"
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cut := range []string{"bytes", "random", "whole"} {
		var got []int32
		s := frameScanner{header: 8, on: func(n int, h []byte) {
			if n != len(got) {
				t.Fatalf("%s: packet numbered %d, want %d", cut, n, len(got))
			}
			if len(h) < 4 {
				got = append(got, -1)
				return
			}
			got = append(got, int32(binary.BigEndian.Uint32(h)))
		}}
		b := stream.Bytes()
		for len(b) > 0 {
			k := len(b)
			switch cut {
			case "bytes":
				k = 1
			case "random":
				k = min(len(b), 1+rng.IntN(20))
			}
			s.feed(b[:k])
			b = b[k:]
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: xids %v, want %v", cut, got, want)
		}
	}
}
